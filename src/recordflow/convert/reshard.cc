// Reshard (see reshard.h): count the inputs' records, fix their order, write the shards one by
// one, each published atomically.
#include "recordflow/convert/reshard.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "json_internal.h"
#include "recordflow/convert/plan.h"
#include "recordflow/core/random.h"
#include "recordflow/format/record_index.h"
#include "recordflow/format/record_reader.h"
#include "recordflow/format/record_writer.h"
#include "recordflow/io/file.h"
#include "recordflow/io/filesystem.h"
#include "recordflow/io/glob.h"

namespace recordflow::convert {
namespace {

namespace fs = std::filesystem;
using internal::JsonValue;

constexpr char kPlanFile[] = ".reshard-plan.json";

uint64_t Fnv1a(std::string_view s, uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string Hex(uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// One input file and how its records are reached.
struct Input {
  std::string path;
  format::Compression compression = format::Compression::kNone;
  uint64_t file_bytes = 0;
  uint64_t records = 0;
  uint64_t first = 0;  // global number of its first record (input order)
  // Uncompressed: random access through the index built while counting.
  std::unique_ptr<format::IndexedRecordReader> indexed;
  // Compressed: a forward cursor, reopened when a shard needs records behind it.
  std::unique_ptr<format::RecordReader> stream;
  uint64_t stream_next = 0;  // local index of the record the cursor reads next
};

format::RecordReaderOptions ReaderOptions(const Input& in) {
  format::RecordReaderOptions o;
  o.compression = in.compression;
  o.verify_checksums = true;
  return o;
}

// Counts (and, uncompressed, indexes) one input, checking every CRC.
Status CountInput(Input& in) {
  RF_ASSIGN_OR_RETURN(const io::FileInfo info, io::StatPath(in.path));  // local or URL
  in.file_bytes = info.size;
  if (in.compression == format::Compression::kNone) {
    RF_ASSIGN_OR_RETURN(std::vector<format::IndexEntry> entries,
                        format::BuildIndex(in.path, ReaderOptions(in)));
    in.records = entries.size();
    RF_ASSIGN_OR_RETURN(in.indexed, format::IndexedRecordReader::Open(in.path, std::move(entries)));
    return Status::OK();
  }
  RF_ASSIGN_OR_RETURN(std::unique_ptr<format::RecordReader> reader,
                      format::RecordReader::Open(in.path, ReaderOptions(in)));
  std::span<const std::byte> record;
  while (true) {
    RF_ASSIGN_OR_RETURN(bool more, reader->ReadRecord(&record));
    if (!more) break;
    ++in.records;
  }
  return Status::OK();
}

// Reads the records `wanted` (sorted local indexes) of a compressed input into `out` (same
// order), streaming forward from its cursor or, when the cursor is past the first one, from
// the start again.
Status ReadStreamed(Input& in, const std::vector<uint64_t>& wanted, std::vector<std::string>* out) {
  if (wanted.empty()) return Status::OK();
  if (in.stream == nullptr || in.stream_next > wanted.front()) {
    RF_ASSIGN_OR_RETURN(in.stream, format::RecordReader::Open(in.path, ReaderOptions(in)));
    in.stream_next = 0;
  }
  std::span<const std::byte> record;
  for (uint64_t want : wanted) {
    while (true) {
      RF_ASSIGN_OR_RETURN(bool more, in.stream->ReadRecord(&record));
      if (!more) {
        return DataLossError("'" + in.path + "' ended at record " + std::to_string(in.stream_next) +
                             " while resharding (it had " + std::to_string(in.records) +
                             " records when counted: did it change?)");
      }
      if (in.stream_next++ == want) break;
    }
    out->emplace_back(reinterpret_cast<const char*>(record.data()), record.size());
  }
  return Status::OK();
}

bool IsOurTemp(const std::string& name, const std::string& prefix) {
  return name.size() > 1 && name[0] == '.' &&
         name.compare(1, prefix.size() + 1, prefix + "-") == 0 &&
         name.find(".tmp-") != std::string::npos;
}

bool IsOurShard(const std::string& name, const std::string& prefix) {
  return name.compare(0, prefix.size() + 1, prefix + "-") == 0 &&
         name.find(".tfrecord") != std::string::npos && name.find("-of-") != std::string::npos;
}

uint64_t FileSizeOr0(const std::string& path) {
  const Result<io::FileInfo> info = io::StatPath(path);  // local or URL
  return info.ok() && !info->is_directory ? info->size : 0;
}

// A shard left by an interrupted run is whole when it was published (renamed) and, when
// indexed, its index was published after it with one line per record of the plan.
bool ShardComplete(const std::string& path, bool indexed, uint64_t records) {
  const Result<io::FileInfo> info = io::StatPath(path);
  if (!info.ok() || info->is_directory) return false;
  if (!indexed) return true;
  Result<std::vector<format::IndexEntry>> entries = format::ReadIndexFile(path + ".idx");
  return entries.ok() && entries->size() == records &&
         (records == 0 || entries->back().offset + entries->back().size == FileSizeOr0(path));
}

}  // namespace

std::string ReshardFileName(const std::string& prefix, int index, int count,
                            format::Compression compression) {
  // convert's shard names, with the prefix in place of the split.
  return ShardFileName(prefix, index, count, compression);
}

std::string ReshardSummary::ToJson() const {
  std::vector<std::string> files, shard_items;
  for (const std::string& f : inputs) files.push_back(JsonQuote(f));
  for (const ReshardShard& s : shards) {
    shard_items.push_back(internal::ShardJson(s.file, s.records, s.bytes, s.resumed));
  }
  return JsonWriter(JsonLayout::kSpaced)
      .AddRaw("inputs", JsonArray(files, JsonLayout::kSpaced))
      .AddString("destination", destination)
      .AddUint("records", records)
      .AddUint("input_bytes", input_bytes)
      .AddUint("output_bytes", output_bytes)
      .AddUint("resumed_shards", resumed_shards)
      .AddUint("records_this_run", records_this_run)
      .AddDouble("seconds", seconds)
      .AddRaw("shards", JsonArray(shard_items, JsonLayout::kSpaced))
      .str();
}

Result<ReshardSummary> Reshard(const std::vector<std::string>& paths, const std::string& dst,
                               const ReshardOptions& options) {
  if (io::IsRemotePath(dst) && dst.size() > 1 && dst.back() == '/') {
    // Keys never end in '/': "s3://b/out/" and "s3://b/out" are one destination.
    return Reshard(paths, dst.substr(0, dst.size() - 1), options);
  }
  const auto start = std::chrono::steady_clock::now();
  if (paths.empty()) return InvalidArgumentError("reshard: no input files");
  RF_ASSIGN_OR_RETURN(const std::vector<std::string> files, io::ExpandGlobs(paths));
  if (options.num_shards < 1) {
    return InvalidArgumentError("reshard: --shards must be >= 1 (got " +
                                std::to_string(options.num_shards) + ")");
  }
  if (options.prefix.empty() || options.prefix.find('/') != std::string::npos) {
    return InvalidArgumentError("reshard: the shard name prefix must be a non-empty file name");
  }
  const int n = options.num_shards;
  const bool indexed = options.write_index && options.compression == format::Compression::kNone;
  std::vector<std::string> names(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) names[k] = ReshardFileName(options.prefix, k, n, options.compression);

  // 1. Inputs: exist, are not outputs, and their records (every CRC checked).
  std::error_code ec;
  std::vector<Input> inputs(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    Input& in = inputs[i];
    in.path = files[i];
    const Result<io::FileInfo> info = io::StatPath(in.path);  // local or URL
    if (!info.ok()) {
      if (info.status().code() != StatusCode::kNotFound) return info.status();
      return NotFoundError("reshard: no such input file: '" + in.path + "'");
    }
    if (info->is_directory) {
      return InvalidArgumentError("reshard: '" + in.path + "' is a folder, not a TFRecord file");
    }
    // URLs compare as strings (no links or "..": a key is what it says).
    const bool remote = io::IsRemotePath(dst) || io::IsRemotePath(in.path);
    const fs::path dir = remote ? fs::path(dst).lexically_normal() : fs::weakly_canonical(dst, ec);
    const fs::path here =
        remote ? fs::path(in.path).lexically_normal() : fs::weakly_canonical(in.path, ec);
    if (here.parent_path() == dir && IsOurShard(here.filename().string(), options.prefix)) {
      return InvalidArgumentError(
          "reshard: input '" + in.path + "' is in '" + dst +
          "' and named like an output shard; choose another DST or --prefix");
    }
    in.compression = options.input_compression.value_or(format::CompressionFromPath(in.path));
  }
  uint64_t total = 0;
  for (Input& in : inputs) {
    RF_RETURN_IF_ERROR(CountInput(in));
    in.first = total;
    total += in.records;
  }

  // 2. The plan: what a resumed run must match.
  std::string plan_text;
  for (const Input& in : inputs) {
    plan_text += in.path + "\n" + std::to_string(in.file_bytes) + "\n" +
                 std::to_string(in.records) + "\n" +
                 std::string(format::CompressionName(in.compression)) + "\n";
  }
  plan_text += std::to_string(n) + "\n" +
               (options.shuffle ? "shuffle " + std::to_string(options.seed) : "ordered") + "\n" +
               std::string(format::CompressionName(options.compression)) + "\n" + options.prefix +
               "\n" + (indexed ? "indexed" : "no index") + "\n";
  const std::string plan_hash = Hex(Fnv1a(plan_text));

  // 3. Destination: whole shards of an earlier run are kept only with resume, and only for
  // the same plan; its temporary files are removed.
  bool has_outputs = false;
  std::vector<fs::path> temps;  // removed once this run is known to proceed
  if (io::IsRemotePath(dst)) {
    // A bucket has no temporary objects: an interrupted upload never became one.
    RF_ASSIGN_OR_RETURN(io::FileSystem * store, io::FileSystemForPath(dst));
    RF_ASSIGN_OR_RETURN(const std::vector<std::string> keys, store->ListPrefix(dst + "/"));
    for (const std::string& key : keys) {
      const std::string name = key.substr(dst.size() + 1);
      if (name.find('/') == std::string::npos && IsOurShard(name, options.prefix)) {
        has_outputs = true;
      }
    }
  } else {
    fs::create_directories(dst, ec);
    if (ec) return ErrnoToStatus(ec.value(), "cannot create", dst);
    for (fs::directory_iterator it(dst, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (IsOurTemp(name, options.prefix)) {
        temps.push_back(it->path());
      } else if (IsOurShard(name, options.prefix)) {
        has_outputs = true;
      }
    }
    if (ec) return ErrnoToStatus(ec.value(), "cannot list", dst);
  }
  const std::string plan_path = dst + "/" + kPlanFile;
  const Result<io::FileInfo> plan_info = io::StatPath(plan_path);
  if (!plan_info.ok() && plan_info.status().code() != StatusCode::kNotFound) {
    return plan_info.status();
  }
  const bool has_plan = plan_info.ok();
  if (!options.resume && (has_outputs || has_plan)) {
    return AlreadyExistsError("reshard: '" + dst + "' already holds '" + options.prefix +
                              "-*' shards; use --resume to finish an interrupted run, or "
                              "another DST");
  }
  if (options.resume && has_plan) {
    RF_ASSIGN_OR_RETURN(std::string text, io::ReadFileToString(plan_path, 1 << 20));
    Result<JsonValue> json = internal::ParseJson(text);
    const JsonValue* hash = json.ok() ? json->Find("plan_hash") : nullptr;
    if (hash == nullptr || hash->text != plan_hash) {
      return FailedPreconditionError("reshard: cannot resume in '" + dst +
                                     "': it was started with other inputs or options "
                                     "(plan " +
                                     (hash ? hash->text : std::string("unreadable")) + ", now " +
                                     plan_hash + "); use the same ones, or another DST");
    }
  } else if (options.resume && has_outputs) {
    return FailedPreconditionError("reshard: cannot resume in '" + dst + "': it holds '" +
                                   options.prefix + "-*' shards but no " + kPlanFile);
  }
  for (const fs::path& temp : temps) {
    std::error_code ignored;
    fs::remove(temp, ignored);
  }
  io::AtomicFileOptions file_options;
  file_options.sync = options.sync;
  RF_RETURN_IF_ERROR(io::WriteStringToFileAtomic(plan_path,
                                                 JsonWriter(JsonLayout::kSpaced)
                                                         .AddString("plan_hash", plan_hash)
                                                         .AddUint("records", total)
                                                         .AddUint("shards", n)
                                                         .str() +
                                                     "\n",
                                                 file_options));

  // 4. The order of all records (global numbers), cut into n runs.
  std::vector<uint64_t> order(total);
  std::iota(order.begin(), order.end(), uint64_t{0});
  if (options.shuffle) {
    SplitMix64 rng(options.seed);
    for (uint64_t i = total; i > 1; --i) std::swap(order[i - 1], order[rng.Below(i)]);
  }
  std::vector<uint64_t> firsts;  // inputs' first global numbers, for the lookup below
  for (const Input& in : inputs) firsts.push_back(in.first);
  auto input_of = [&](uint64_t g) {
    return static_cast<size_t>(std::upper_bound(firsts.begin(), firsts.end(), g) - firsts.begin() -
                               1);
  };

  ReshardSummary summary;
  summary.inputs = files;
  summary.destination = dst;
  summary.records = total;
  for (const Input& in : inputs) summary.input_bytes += in.file_bytes;
  std::vector<std::byte> scratch;
  for (int k = 0; k < n; ++k) {
    const uint64_t begin = total * static_cast<uint64_t>(k) / n;
    const uint64_t end = total * static_cast<uint64_t>(k + 1) / n;
    const std::string path = dst + "/" + names[k];
    ReshardShard shard{names[k], end - begin, 0, false};
    if (options.resume && ShardComplete(path, indexed, end - begin)) {
      shard.resumed = true;
      shard.bytes = FileSizeOr0(path);
      ++summary.resumed_shards;
      summary.output_bytes += shard.bytes;
      summary.shards.push_back(shard);
      continue;
    }
    // Records of compressed inputs first, streamed in file order, one shard's worth.
    std::vector<std::vector<uint64_t>> wanted(inputs.size());
    for (uint64_t p = begin; p < end; ++p) {
      const size_t i = input_of(order[p]);
      if (inputs[i].indexed == nullptr) wanted[i].push_back(order[p] - inputs[i].first);
    }
    std::vector<std::vector<std::string>> streamed(inputs.size());
    std::vector<size_t> next_streamed(inputs.size(), 0);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (wanted[i].empty()) continue;
      std::vector<uint64_t> sorted = wanted[i];
      std::sort(sorted.begin(), sorted.end());
      std::vector<std::string> records;
      RF_RETURN_IF_ERROR(ReadStreamed(inputs[i], sorted, &records));
      // Back into this shard's order.
      std::vector<std::string>& mine = streamed[i];
      mine.resize(records.size());
      for (size_t j = 0; j < wanted[i].size(); ++j) {
        const size_t at = static_cast<size_t>(
            std::lower_bound(sorted.begin(), sorted.end(), wanted[i][j]) - sorted.begin());
        mine[j] = records[at];
      }
    }
    format::RecordWriterOptions wo;
    wo.compression = options.compression;
    wo.write_index = indexed;
    wo.sync = options.sync;
    RF_ASSIGN_OR_RETURN(std::unique_ptr<format::RecordWriter> writer,
                        format::RecordWriter::Open(path, wo));
    for (uint64_t p = begin; p < end; ++p) {
      const size_t i = input_of(order[p]);
      Input& in = inputs[i];
      if (in.indexed != nullptr) {
        RF_ASSIGN_OR_RETURN(std::span<const std::byte> record,
                            in.indexed->ReadRecord(order[p] - in.first, &scratch));
        RF_RETURN_IF_ERROR(writer->WriteRecord(record));
      } else {
        const std::string& r = streamed[i][next_streamed[i]++];
        RF_RETURN_IF_ERROR(writer->WriteRecord(std::as_bytes(std::span(r.data(), r.size()))));
      }
    }
    RF_RETURN_IF_ERROR(writer->Close());
    shard.bytes = FileSizeOr0(path);
    summary.output_bytes += shard.bytes;
    summary.records_this_run += shard.records;
    summary.shards.push_back(shard);
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace recordflow::convert
