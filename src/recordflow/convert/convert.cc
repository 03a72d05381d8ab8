// The parallel writer: workers read, check and transcode inputs; the calling thread writes
// each shard's records in plan order, so the bytes never depend on thread timing.
//
// Over 600 lines: PrepareImage, resume (state files), the atomic overwrite swap and the writer
// loop are one sequence that shares the shard state; where inputs come from is
// input_source.cc's.
#include "recordflow/convert/convert.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <regex>
#include <thread>

#include "json_internal.h"
#include "recordflow/convert/input_source.h"
#include "recordflow/convert/plan.h"
#include "recordflow/core/thread_pool.h"
#include "recordflow/example/example.h"
#include "recordflow/format/record_writer.h"
#include "recordflow/image/image.h"
#include "recordflow/image/ops.h"
#include "recordflow/io/file.h"
#include "recordflow/io/filesystem.h"

namespace recordflow::convert {
namespace fs = std::filesystem;
using internal::JsonValue;

namespace {

constexpr const char* kStateDir = ".recordflow-convert";

// What a worker made of one input.
struct ItemResult {
  bool ok = false;
  std::string record;  // serialized Example
  Status error;        // why it was skipped
  uint64_t input_bytes = 0;
  bool transcoded = false;
};

std::string StoredColorspace(image::ColorSpace cs) {
  switch (cs) {
    case image::ColorSpace::kYCbCr:
    case image::ColorSpace::kRGB:
      return "RGB";
    default:
      return std::string(image::ColorSpaceName(cs));
  }
}

// A libjpeg warning (extraneous bytes, corrupt data mid-stream) makes the decoder invent
// pixels: under --verify decode that is corrupt data, as docs/cli.md says. image::Decode only
// fails on truncation, so JPEGs are checked by a full decode that treats warnings as errors.
Status DecodeJpegStrictly(std::span<const std::byte> data, uint64_t max_pixels) {
  thread_local image::ImageDecoder decoder;
  image::RegionDecodeOptions region_options;
  region_options.dct_scaling = false;
  region_options.max_pixels = max_pixels;
  region_options.warnings = image::JpegWarnings::kError;
  image::DecodedRegion region;
  return decoder.DecodeRegion(data, region_options, &region);
}

}  // namespace

Result<PreparedImage> PrepareImage(std::string bytes, const ConvertOptions& options) {
  const auto data = std::as_bytes(std::span(bytes.data(), bytes.size()));
  image::ProbeOptions probe_options;
  probe_options.check_structure = options.verify != VerifyLevel::kHeader;
  probe_options.max_pixels = options.max_pixels;
  RF_ASSIGN_OR_RETURN(const image::ImageInfo info, image::Probe(data, probe_options));
  if (info.pixels() > options.max_pixels) {
    return ResourceExhaustedError("image of " + std::to_string(info.width) + "x" +
                                  std::to_string(info.height) + " pixels is over the limit of " +
                                  std::to_string(options.max_pixels) + " pixels");
  }
  const bool is_jpeg = info.format == image::ImageFormat::kJpeg;
  bool transcode = false;
  if (!is_jpeg && options.non_jpeg == NonJpegPolicy::kTranscode) transcode = true;
  if (options.resize_shorter > 0 && std::min(info.width, info.height) > options.resize_shorter) {
    transcode = true;
  }
  if (options.apply_exif_orientation && info.orientation != 1) transcode = true;
  if (options.force_rgb && (info.channels != 3 || (info.colorspace != image::ColorSpace::kYCbCr &&
                                                   info.colorspace != image::ColorSpace::kRGB))) {
    transcode = true;
  }
  PreparedImage out;
  out.format = std::string(image::ImageFormatName(info.format));
  out.width = info.width;
  out.height = info.height;
  out.channels = info.channels;
  out.colorspace = StoredColorspace(info.colorspace);
  if (options.verify == VerifyLevel::kDecode && is_jpeg) {
    RF_RETURN_IF_ERROR(DecodeJpegStrictly(data, options.max_pixels));
  }
  if (transcode || (options.verify == VerifyLevel::kDecode && !is_jpeg)) {
    image::DecodeOptions decode_options;
    decode_options.max_pixels = options.max_pixels;
    decode_options.apply_orientation = options.apply_exif_orientation;
    decode_options.desired_channels = (info.decoded_channels() <= 2 && !options.force_rgb) ? 1 : 3;
    // Shrinking anyway: let libjpeg's DCT scaling do the first halvings (keeps at least the
    // target size, so the antialiased resize still makes the final step).
    if (transcode && options.resize_shorter > 0) {
      decode_options.min_shorter_side = options.resize_shorter;
    }
    RF_ASSIGN_OR_RETURN(image::Image pixels, image::Decode(data, decode_options));
    if (transcode) {
      if (options.resize_shorter > 0 &&
          std::min(pixels.width, pixels.height) > options.resize_shorter) {
        int w, h;
        image::SizeForShorterSide(pixels.width, pixels.height, options.resize_shorter, &w, &h);
        RF_ASSIGN_OR_RETURN(pixels, image::Resize(pixels, w, h));
      }
      image::JpegEncodeOptions encode_options;
      encode_options.quality = options.quality;
      RF_ASSIGN_OR_RETURN(out.encoded, image::EncodeJpeg(pixels, encode_options));
      out.format = "JPEG";
      out.width = pixels.width;
      out.height = pixels.height;
      out.channels = pixels.channels;
      out.colorspace = out.channels == 1 ? "Gray" : "RGB";
      out.transcoded = true;
    }
  }
  if (!out.transcoded) out.encoded = std::move(bytes);
  return out;
}

namespace {

ItemResult ProcessItem(const InputItem& item, const InputSource& source,
                       const InputListing& listing, const ConvertOptions& options) {
  ItemResult result;
  Result<LoadedInput> loaded = source.Load(item, options);
  if (!loaded.ok()) {
    result.error = loaded.status();
    return result;
  }
  example::Features features = item.extra;
  features.merge(loaded->extra);
  using example::Feature;
  if (loaded->image) {
    result.input_bytes = loaded->image->size();
    Result<PreparedImage> prepared = PrepareImage(std::move(*loaded->image), options);
    if (!prepared.ok()) {
      result.error = prepared.status();
      return result;
    }
    result.transcoded = prepared->transcoded || loaded->transcoded;
    features["image/encoded"] = Feature::Bytes({std::move(prepared->encoded)});
    features["image/format"] = Feature::Bytes({prepared->format});
    features["image/height"] = Feature::Int64s({prepared->height});
    features["image/width"] = Feature::Int64s({prepared->width});
    features["image/channels"] = Feature::Int64s({prepared->channels});
    features["image/colorspace"] = Feature::Bytes({prepared->colorspace});
  }
  if (!item.filename.empty()) features["image/filename"] = Feature::Bytes({item.filename});
  if (!item.labels.empty()) {
    std::vector<int64_t> labels;
    std::vector<std::string> texts;
    for (int64_t l : item.labels) {
      labels.push_back(l + options.label_offset);
      if (listing.named_classes && l >= 0 && static_cast<size_t>(l) < listing.class_names.size()) {
        texts.push_back(listing.class_names[l]);
      }
    }
    features["image/class/label"] = Feature::Int64s(std::move(labels));
    if (!texts.empty()) features["image/class/text"] = Feature::Bytes(std::move(texts));
  }
  result.record = example::SerializeExample(features);
  result.ok = true;
  return result;
}

std::string SkippedReason(const Status& s) {
  return std::string(StatusCodeName(s.code())) + ": " + s.message();
}

// What a finished shard contributed; also its state file in DST/.recordflow-convert/.
struct ShardResult {
  uint64_t records = 0;
  uint64_t bytes = 0;
  uint64_t input_bytes = 0;
  uint64_t transcoded = 0;
  std::vector<uint64_t> per_class;
  std::vector<SkippedInput> skipped;
  std::string etag;  // of the published object (empty for local files)
  bool resumed = false;

  std::string ToJson(const std::string& file) const {
    std::vector<std::string> counts;
    for (uint64_t c : per_class) counts.push_back(std::to_string(c));
    return JsonWriter(JsonLayout::kSpaced)
               .AddString("file", file)
               .AddUint("records", records)
               .AddUint("bytes", bytes)
               .AddUint("input_bytes", input_bytes)
               .AddUint("transcoded", transcoded)
               .AddRaw("per_class", JsonArray(counts, JsonLayout::kSpaced))
               .AddRaw("skipped", internal::SkippedJson(skipped, "path"))
               .AddString("etag", etag)
               .str() +
           "\n";
  }

  static Result<ShardResult> FromJson(const JsonValue& v) {
    ShardResult r;
    const JsonValue* records = v.Find("records");
    const JsonValue* bytes = v.Find("bytes");
    if (records == nullptr || bytes == nullptr) return DataLossError("incomplete shard state");
    r.records = static_cast<uint64_t>(records->AsInt());
    r.bytes = static_cast<uint64_t>(bytes->AsInt());
    if (const JsonValue* x = v.Find("input_bytes")) r.input_bytes = x->AsInt();
    if (const JsonValue* x = v.Find("transcoded")) r.transcoded = x->AsInt();
    if (const JsonValue* x = v.Find("etag")) r.etag = x->text;
    if (const JsonValue* x = v.Find("per_class")) {
      for (const auto& c : x->items) r.per_class.push_back(c.AsInt());
    }
    if (const JsonValue* x = v.Find("skipped")) {
      for (const auto& s : x->items) {
        const JsonValue* path = s.Find("path");
        const JsonValue* reason = s.Find("reason");
        r.skipped.push_back({path ? path->text : "", reason ? reason->text : ""});
      }
    }
    return r;
  }
};

// A published output: a regular file, or an object (with its ETag). nullopt when absent.
std::optional<io::FileInfo> OutputInfo(const std::string& path) {
  if (!io::IsRemotePath(path)) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
    io::FileInfo info;
    info.size = static_cast<uint64_t>(st.st_size);
    return info;
  }
  Result<io::FileInfo> info = io::StatPath(path);
  if (!info.ok() || info->is_directory) return std::nullopt;
  return *info;
}

// True when the index at `index_path` lists exactly `records` records that tile the shard's
// `bytes` from offset 0: an index of another (earlier, partial) shard never passes.
bool IndexMatches(const std::string& index_path, uint64_t records, uint64_t bytes) {
  // A line is at most two 20-digit numbers, a space and a newline.
  Result<std::string> text = io::ReadFileToString(index_path, (records + 1) * 42);
  if (!text.ok()) return false;
  uint64_t lines = 0, expected = 0;
  size_t pos = 0;
  while (pos < text->size()) {
    const size_t end = text->find('\n', pos);
    if (end == std::string::npos) return false;
    unsigned long long offset = 0, size = 0;
    if (std::sscanf(text->c_str() + pos, "%llu %llu", &offset, &size) != 2) return false;
    if (offset != expected) return false;
    expected += size;
    ++lines;
    pos = end + 1;
  }
  return lines == records && expected == bytes;
}

bool IsOutputName(const std::string& name) {
  static const std::regex kShard(
      R"((train|validation)-[0-9]{5}-of-[0-9]{5}\.tfrecord(\.gz|\.zz)?(\.idx)?)");
  return std::regex_match(name, kShard);
}

// A temporary file of an interrupted AtomicFileWriter for one of our outputs.
bool IsStaleTemp(const std::string& name) {
  if (name.empty() || name[0] != '.') return false;
  const size_t tmp = name.find(".tmp-");
  return tmp != std::string::npos && IsOutputName(name.substr(1, tmp - 1));
}

// The plan hash an earlier run left in DST (empty when none), or why this run may not go on
// with what DST holds.
Result<std::string> EarlierPlanHash(const std::string& dst, const ConvertOptions& options,
                                    bool has_state, bool has_outputs) {
  if (!options.resume && (has_state || has_outputs)) {
    return AlreadyExistsError("'" + dst +
                              "' already holds converted shards; use resume to finish "
                              "an interrupted run, or overwrite to replace them");
  }
  if (!has_state) {
    if (!has_outputs) return std::string();
    return FailedPreconditionError("cannot resume in '" + dst + "': it holds shards but no " +
                                   kStateDir +
                                   " folder (not made by recordflow convert?); use "
                                   "overwrite");
  }
  Result<std::string> text = io::ReadFileToString(dst + "/" + kStateDir + "/plan.json", 1 << 20);
  if (!text.ok()) return std::string();
  Result<JsonValue> plan = internal::ParseJson(*text);
  if (plan.ok() && plan->Find("plan_hash") != nullptr) return plan->Find("plan_hash")->text;
  return std::string();
}

// PrepareDestination for a key prefix in a bucket. Nothing to create or clean: an interrupted
// upload never became an object (the store drops it after its incomplete-upload lifetime).
// Overwrite deletes the earlier conversion's objects first; each new object then appears
// whole.
Result<std::string> PrepareBucketDestination(const std::string& dst,
                                             const ConvertOptions& options) {
  RF_ASSIGN_OR_RETURN(io::FileSystem * store, io::FileSystemForPath(dst));
  const std::string prefix = dst + "/";
  const std::string state_prefix = prefix + kStateDir + "/";
  RF_ASSIGN_OR_RETURN(std::vector<std::string> keys, store->ListPrefix(prefix));
  std::vector<std::string> ours;
  bool has_state = false, has_outputs = false;
  for (const std::string& key : keys) {
    if (key.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string name = key.substr(prefix.size());
    if (key.compare(0, state_prefix.size(), state_prefix) == 0) {
      has_state = true;
      ours.push_back(key);
    } else if (IsOutputName(name)) {
      has_outputs = true;
      ours.push_back(key);
    } else if (name == "labels.txt" || name == "summary.json") {
      ours.push_back(key);
    }
  }
  if (options.overwrite) {
    for (const std::string& key : ours) RF_RETURN_IF_ERROR(store->Delete(key));
    return std::string();
  }
  return EarlierPlanHash(dst, options, has_state, has_outputs);
}

// Prepares DST: refuses to mix with an earlier conversion unless resume/overwrite say how.
// Returns the resumable plan hash found there (empty when none).
Result<std::string> PrepareDestination(const std::string& dst, const ConvertOptions& options) {
  if (io::IsRemotePath(dst)) return PrepareBucketDestination(dst, options);
  std::error_code ec;
  fs::create_directories(dst, ec);
  if (ec) return ErrnoToStatus(ec.value(), "cannot create", dst);
  const std::string state_dir = dst + "/" + kStateDir;
  std::vector<std::string> outputs, temps;
  for (fs::directory_iterator it(dst, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (IsOutputName(name)) outputs.push_back(name);
    if (IsStaleTemp(name)) temps.push_back(name);
  }
  if (ec) return ErrnoToStatus(ec.value(), "cannot list", dst);
  for (const auto& name : temps) fs::remove(dst + "/" + name, ec);
  const bool has_state = fs::exists(state_dir, ec);
  if (options.overwrite) {
    for (const auto& name : outputs) fs::remove(dst + "/" + name, ec);
    fs::remove_all(state_dir, ec);
    fs::remove(dst + "/labels.txt", ec);
    fs::remove(dst + "/summary.json", ec);
    fs::create_directories(state_dir, ec);
    if (ec) return ErrnoToStatus(ec.value(), "cannot create", state_dir);
    return std::string();
  }
  RF_ASSIGN_OR_RETURN(std::string hash, EarlierPlanHash(dst, options, has_state, !outputs.empty()));
  fs::create_directories(state_dir, ec);
  if (ec) return ErrnoToStatus(ec.value(), "cannot create", state_dir);
  return hash;
}

// True when `dst` holds anything of an earlier conversion.
bool HoldsConversion(const std::string& dst) {
  std::error_code ec;
  for (fs::directory_iterator it(dst, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (IsOutputName(name) || name == kStateDir || name == "summary.json") return true;
  }
  return false;
}

// Outputs of a conversion (what an overwrite replaces); everything else in DST is the user's.
bool IsConversionEntry(const std::string& name) {
  return IsOutputName(name) || IsStaleTemp(name) || name == kStateDir || name == "labels.txt" ||
         name == "summary.json";
}

Result<ConvertSummary> ConvertInto(InputSource& source, const std::string& dst,
                                   const std::string& shown_dst, const ConvertOptions& options);

// Overwrite: the new conversion is written into a sibling folder and swapped in only when it
// is complete (one atomic RENAME_EXCHANGE where the file system has it), so a failure
// (full disk, kill, bad input with strict) leaves the earlier output as it was.
Result<ConvertSummary> ConvertAndSwap(InputSource& source, const std::string& dst,
                                      const ConvertOptions& options) {
  std::error_code ec;
  // The folder itself, not a symlink to it, is what gets swapped.
  const fs::path real = fs::canonical(dst, ec);
  if (ec) return ErrnoToStatus(ec.value(), "cannot resolve", dst);
  const fs::path parent = real.parent_path();
  const std::string base = real.filename().string();
  std::string staging;
  for (int attempt = 0;; ++attempt) {
    staging = (parent / ("." + base + ".rf-new-" + std::to_string(::getpid()) + "-" +
                         std::to_string(attempt)))
                  .string();
    if (::mkdir(staging.c_str(), 0755) == 0) break;
    if (errno != EEXIST || attempt > 100) {
      return ErrnoToStatus(errno, "cannot create the staging folder", staging);
    }
  }
  ConvertOptions inner = options;
  inner.overwrite = false;
  Result<ConvertSummary> summary = ConvertInto(source, staging, dst, inner);
  if (!summary.ok()) {
    fs::remove_all(staging, ec);
    return summary.status();
  }
  const std::string old = staging + ".old";
  if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, real.c_str(), RENAME_EXCHANGE) == 0) {
    if (::rename(staging.c_str(), old.c_str()) != 0) {
      return ErrnoToStatus(errno, "cannot rename the replaced output", staging);
    }
  } else {
    if (errno != EINVAL && errno != ENOSYS) {
      const int err = errno;
      fs::remove_all(staging, ec);
      return ErrnoToStatus(err, "cannot swap in the new output", dst);
    }
    if (::rename(real.c_str(), old.c_str()) != 0) {
      const int err = errno;
      fs::remove_all(staging, ec);
      return ErrnoToStatus(err, "cannot move the earlier output aside", dst);
    }
    if (::rename(staging.c_str(), real.c_str()) != 0) {
      const int err = errno;
      ::rename(old.c_str(), real.c_str());
      fs::remove_all(staging, ec);
      return ErrnoToStatus(err, "cannot swap in the new output", dst);
    }
  }
  // The user's own files in DST come along; the earlier conversion's go.
  for (fs::directory_iterator it(old, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (IsConversionEntry(name)) continue;
    if (::rename(it->path().c_str(), (real / name).c_str()) != 0) {
      return ErrnoToStatus(errno, "cannot move '" + name + "' into the new output; it is in", old);
    }
  }
  fs::remove_all(old, ec);
  return summary;
}

}  // namespace

Status CheckDestination(const std::string& dst, const ConvertOptions& options) {
  std::error_code ec;
  if (options.overwrite || options.resume || !fs::is_directory(dst, ec) || !HoldsConversion(dst)) {
    return Status();
  }
  return AlreadyExistsError("'" + dst +
                            "' already holds converted shards; use resume to finish an "
                            "interrupted run, or overwrite to replace them");
}

Result<ConvertSummary> Convert(InputSource& source, const std::string& dst,
                               const ConvertOptions& options) {
  std::error_code ec;
  if (io::IsRemotePath(dst)) {
    // Keys never end in '/': "s3://b/out/" and "s3://b/out" are one destination.
    std::string prefix = dst;
    while (prefix.size() > 1 && prefix.back() == '/') prefix.pop_back();
    if (io::ParseUrl(prefix).authority.empty()) {
      return InvalidArgumentError("destination '" + dst + "' names no bucket");
    }
    return ConvertInto(source, prefix, dst, options);
  }
  if (options.overwrite && !options.resume && fs::is_directory(dst, ec) && HoldsConversion(dst)) {
    return ConvertAndSwap(source, dst, options);
  }
  return ConvertInto(source, dst, dst, options);
}

Result<ConvertSummary> Convert(const std::string& src, const std::string& dst,
                               const ConvertOptions& options) {
  std::unique_ptr<InputSource> source = MakePathSource(src);
  return Convert(*source, dst, options);
}

namespace {

Result<ConvertSummary> ConvertInto(InputSource& source, const std::string& dst,
                                   const std::string& shown_dst, const ConvertOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  if (options.quality < 1 || options.quality > 100) {
    return InvalidArgumentError("quality must be 1..100 (got " + std::to_string(options.quality) +
                                ")");
  }
  if (options.resize_shorter < 0) return InvalidArgumentError("resize_shorter must be >= 0");
  if (options.resume && options.overwrite) {
    return InvalidArgumentError("resume and overwrite exclude each other");
  }
  if (options.write_index && options.compression != format::Compression::kNone) {
    // Index files need random access; a compressed shard has none. Not an error: the
    // default asks for indexes, and GZIP output simply has none.
  }
  // 1. Plan.
  RF_RETURN_IF_ERROR(source.CheckDestination(shown_dst));
  Result<InputListing> listing = source.List(options);
  if (!listing.ok()) return listing.status();
  if (options.strict) {
    // Hidden files are left out by design, not unusable: strict lists them like the rest.
    for (const SkippedInput& skip : listing->skipped) {
      if (skip.reason != "hidden") {
        return InvalidArgumentError("strict: " + skip.path + ": " + skip.reason);
      }
    }
  }
  if (options.label_offset > 0 && !listing->class_names.empty() &&
      options.label_offset > INT64_MAX - static_cast<int64_t>(listing->class_names.size() - 1)) {
    return InvalidArgumentError("label offset " + std::to_string(options.label_offset) + " plus " +
                                std::to_string(listing->class_names.size() - 1) +
                                " (the last class index) is outside the int64 range");
  }
  RF_ASSIGN_OR_RETURN(Plan plan, MakePlan(std::move(listing).value(), options));
  const InputListing& inputs = plan.listing;

  // 2. Destination, resume state.
  RF_ASSIGN_OR_RETURN(std::string previous_hash, PrepareDestination(dst, options));
  const std::string state_dir = dst + "/" + kStateDir;
  if (!previous_hash.empty() && previous_hash != plan.HashHex()) {
    return FailedPreconditionError(
        "cannot resume in '" + dst + "': it was started with different input or options (plan " +
        previous_hash + ", now " + plan.HashHex() + "); use the same ones, or overwrite");
  }
  io::AtomicFileOptions file_options;
  file_options.sync = options.sync;
  RF_RETURN_IF_ERROR(io::WriteStringToFileAtomic(state_dir + "/plan.json",
                                                 JsonWriter(JsonLayout::kSpaced)
                                                         .AddString("plan_hash", plan.HashHex())
                                                         .AddUint("inputs", inputs.items.size())
                                                         .AddUint("shards", plan.shards.size())
                                                         .str() +
                                                     "\n",
                                                 file_options));
  if (inputs.named_classes) {
    std::string labels;
    for (const auto& name : inputs.class_names) labels += name + "\n";
    RF_RETURN_IF_ERROR(io::WriteStringToFileAtomic(dst + "/labels.txt", labels, file_options));
  }

  const bool indexed = options.write_index && options.compression == format::Compression::kNone;
  std::vector<ShardResult> results(plan.shards.size());
  std::vector<bool> done(plan.shards.size(), false);
  ConvertProgress progress;
  progress.total = inputs.items.size();
  if (options.resume) {
    for (size_t s = 0; s < plan.shards.size(); ++s) {
      const std::string file = plan.shards[s].file;
      Result<std::string> text = io::ReadFileToString(state_dir + "/" + file + ".json", 1 << 26);
      if (!text.ok()) continue;
      Result<JsonValue> json = internal::ParseJson(*text);
      if (!json.ok()) continue;
      Result<ShardResult> r = ShardResult::FromJson(*json);
      if (!r.ok()) continue;
      // Complete = published under its final name with the size (and, in a bucket, the ETag)
      // its state file records, and an index that tiles exactly those bytes. Anything else is
      // written again.
      const std::optional<io::FileInfo> info = OutputInfo(dst + "/" + file);
      if (!info || info->size != r->bytes) continue;
      if (!r->etag.empty() && info->etag != r->etag) continue;
      if (indexed && !IndexMatches(dst + "/" + file + ".idx", r->records, r->bytes)) continue;
      r->resumed = true;
      results[s] = std::move(r).value();
      done[s] = true;
      progress.done += plan.shards[s].items.size();
      progress.skipped += results[s].skipped.size();
      progress.bytes_out += results[s].bytes;
    }
  }

  if (!options.only_shards.empty()) {
    for (size_t s = 0; s < plan.shards.size(); ++s) {
      if (std::find(options.only_shards.begin(), options.only_shards.end(), static_cast<int>(s)) ==
          options.only_shards.end()) {
        done[s] = true;  // another run (a Spark task) writes it
      }
    }
  }

  // 3. Work list: every item of every shard still to write, in write order.
  struct Work {
    uint32_t shard;
    uint32_t item;
  };
  std::vector<Work> work;
  for (size_t s = 0; s < plan.shards.size(); ++s) {
    if (done[s]) continue;
    for (uint32_t i : plan.shards[s].items) work.push_back({static_cast<uint32_t>(s), i});
  }
  const int threads = options.num_threads > 0
                          ? options.num_threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Bounded: at most `window` results wait for the writer.
  const size_t window = static_cast<size_t>(threads) * 8;
  struct Shared {
    std::mutex mu;
    std::condition_variable space_cv, ready_cv;
    size_t next = 0;      // next work index to claim
    size_t consumed = 0;  // work items the writer took
    bool cancelled = false;
    std::map<size_t, ItemResult> ready;
  } shared;
  Status failure;
  {
    ThreadPool pool(std::min<int>(threads, static_cast<int>(std::max<size_t>(work.size(), 1))));
    // Stops the workers on every way out of this block (the pool's destructor joins them).
    struct Canceller {
      Shared* shared;
      ~Canceller() {
        std::lock_guard<std::mutex> lock(shared->mu);
        shared->cancelled = true;
        shared->space_cv.notify_all();
      }
    } canceller{&shared};
    for (int t = 0; t < pool.num_threads(); ++t) {
      pool.Schedule([&] {
        while (true) {
          size_t seq;
          {
            std::unique_lock<std::mutex> lock(shared.mu);
            shared.space_cv.wait(lock, [&] {
              return shared.cancelled || shared.next >= work.size() ||
                     shared.next < shared.consumed + window;
            });
            if (shared.cancelled || shared.next >= work.size()) return;
            seq = shared.next++;
          }
          const InputItem& item = inputs.items[work[seq].item];
          ItemResult r;
          // No exception may leave a pool thread: the writer below waits for every item, so an
          // allocation failure is this input's error (skipped and listed), not a lost item.
          const Status caught = CatchExceptions("converting '" + item.path + "'", [&] {
            r = ProcessItem(item, source, inputs, options);
            return Status();
          });
          if (!caught.ok()) {
            r = ItemResult();
            r.error = caught;
          }
          {
            std::lock_guard<std::mutex> lock(shared.mu);
            shared.ready.emplace(seq, std::move(r));
          }
          shared.ready_cv.notify_all();
        }
      });
    }

    // Shards being published in the background, oldest first.
    constexpr size_t kMaxClosing = 2;
    std::deque<std::future<Status>> closing;
    auto drain_one = [&] {
      Status closed = closing.front().get();
      closing.pop_front();
      if (failure.ok()) failure = std::move(closed);
    };
    auto last_report = std::chrono::steady_clock::now();
    size_t seq = 0;
    for (size_t s = 0; s < plan.shards.size() && failure.ok(); ++s) {
      if (done[s]) continue;
      const ShardPlan& shard = plan.shards[s];
      ShardResult& shard_result = results[s];
      if (inputs.named_classes) shard_result.per_class.assign(inputs.class_names.size(), 0);
      format::RecordWriterOptions writer_options;
      writer_options.compression = options.compression;
      writer_options.write_index = indexed;
      writer_options.sync = options.sync;
      const std::string path = dst + "/" + shard.file;
      Result<std::unique_ptr<format::RecordWriter>> writer =
          format::RecordWriter::Open(path, writer_options);
      if (!writer.ok()) {
        failure = writer.status();
        break;
      }
      for (size_t k = 0; k < shard.items.size(); ++k, ++seq) {
        ItemResult r;
        {
          std::unique_lock<std::mutex> lock(shared.mu);
          shared.ready_cv.wait(lock, [&] { return shared.ready.count(seq) != 0; });
          auto it = shared.ready.find(seq);
          r = std::move(it->second);
          shared.ready.erase(it);
          shared.consumed = seq + 1;
        }
        shared.space_cv.notify_all();
        const InputItem& item = inputs.items[work[seq].item];
        shard_result.input_bytes += r.input_bytes;
        ++progress.done;
        if (!r.ok) {
          if (options.strict) {
            failure = r.error.WithContext("strict: '" + item.path + "'");
            break;
          }
          shard_result.skipped.push_back({item.path, SkippedReason(r.error)});
          ++progress.skipped;
        } else {
          Status written =
              (*writer)->WriteRecord(std::as_bytes(std::span(r.record.data(), r.record.size())));
          if (!written.ok()) {
            failure = written;
            break;
          }
          ++shard_result.records;
          shard_result.transcoded += r.transcoded;
          progress.bytes_out += r.record.size() + 16;
          if (inputs.named_classes) {
            for (int64_t l : item.labels) {
              if (l >= 0 && static_cast<size_t>(l) < shard_result.per_class.size())
                ++shard_result.per_class[l];
            }
          }
        }
        if (options.progress) {
          const auto now = std::chrono::steady_clock::now();
          if (now - last_report >= std::chrono::milliseconds(100)) {
            last_report = now;
            progress.seconds = elapsed();
            options.progress(progress);
          }
        }
      }
      if (!failure.ok()) {
        (*writer)->Abort();
        break;
      }
      // Publishing (flush, fsync, rename, index, state file) runs beside the next shard's
      // writing: with sync on, the fsync would otherwise idle every worker.
      std::shared_ptr<format::RecordWriter> finished = std::move(writer).value();
      closing.push_back(std::async(
          std::launch::async,
          [finished, &shard_result, path, state_path = state_dir + "/" + shard.file + ".json",
           file = shard.file, &file_options]() -> Status {
            RF_RETURN_IF_ERROR(finished->Close());
            const std::optional<io::FileInfo> info = OutputInfo(path);
            if (!info) return IOError("'" + path + "' is missing right after it was written");
            shard_result.bytes = info->size;
            shard_result.etag = info->etag;
            return io::WriteStringToFileAtomic(state_path, shard_result.ToJson(file), file_options);
          }));
      while (closing.size() > kMaxClosing) drain_one();
    }
    while (!closing.empty()) drain_one();
  }
  if (!failure.ok()) return failure;

  // 4. Summary.
  ConvertSummary summary;
  summary.source = source.Name();
  summary.destination = shown_dst;
  summary.class_names = inputs.named_classes ? inputs.class_names : std::vector<std::string>();
  summary.label_offset = options.label_offset;
  summary.inputs = inputs.items.size();
  summary.skipped = inputs.skipped;
  for (size_t s = 0; s < plan.shards.size(); ++s) {
    const ShardPlan& shard = plan.shards[s];
    const ShardResult& r = results[s];
    if (summary.splits.empty() || summary.splits.back().name != shard.split) {
      SplitSummary split;
      split.name = shard.split;
      split.per_class.assign(summary.class_names.size(), 0);
      summary.splits.push_back(std::move(split));
    }
    SplitSummary& split = summary.splits.back();
    split.records += r.records;
    split.bytes += r.bytes;
    for (size_t c = 0; c < r.per_class.size() && c < split.per_class.size(); ++c) {
      split.per_class[c] += r.per_class[c];
    }
    split.shards.push_back({shard.file, r.records, r.bytes, r.resumed});
    summary.records += r.records;
    summary.output_bytes += r.bytes;
    summary.input_bytes += r.input_bytes;
    summary.transcoded += r.transcoded;
    summary.resumed_shards += r.resumed;
    if (!r.resumed) summary.records_this_run += r.records;
    summary.skipped.insert(summary.skipped.end(), r.skipped.begin(), r.skipped.end());
  }
  summary.seconds = elapsed();
  if (options.progress) {
    progress.seconds = summary.seconds;
    options.progress(progress);
  }
  RF_RETURN_IF_ERROR(
      io::WriteStringToFileAtomic(dst + "/summary.json", summary.ToJson() + "\n", file_options));
  return summary;
}

}  // namespace

std::string ConvertSummary::ToJson() const {
  std::vector<std::string> classes, splits_json;
  for (const auto& c : class_names) classes.push_back(JsonQuote(c));
  JsonWriter splits_obj(JsonLayout::kSpaced);
  for (const auto& split : splits) {
    std::vector<std::string> shards;
    for (const auto& shard : split.shards) {
      shards.push_back(internal::ShardJson(shard.file, shard.records, shard.bytes, shard.resumed));
    }
    JsonWriter per_class(JsonLayout::kSpaced);
    for (size_t c = 0; c < split.per_class.size() && c < class_names.size(); ++c) {
      per_class.AddUint(class_names[c], split.per_class[c]);
    }
    splits_obj.AddRaw(split.name, JsonWriter(JsonLayout::kSpaced)
                                      .AddUint("records", split.records)
                                      .AddUint("bytes", split.bytes)
                                      .AddRaw("per_class", per_class.str())
                                      .AddRaw("shards", JsonArray(shards, JsonLayout::kSpaced))
                                      .str());
  }
  return JsonWriter(JsonLayout::kSpaced)
      .AddString("source", source)
      .AddString("destination", destination)
      .AddUint("num_classes", class_names.size())
      .AddRaw("classes", JsonArray(classes, JsonLayout::kSpaced))
      .AddInt("label_offset", label_offset)
      .AddUint("inputs", inputs)
      .AddUint("records", records)
      .AddUint("skipped_count", skipped.size())
      .AddUint("transcoded", transcoded)
      .AddUint("input_bytes", input_bytes)
      .AddUint("output_bytes", output_bytes)
      .AddUint("resumed_shards", resumed_shards)
      .AddDouble("seconds", seconds)
      .AddDouble("images_per_second",
                 seconds > 0 ? static_cast<double>(records_this_run) / seconds : 0.0)
      .AddRaw("splits", splits_obj.str())
      .AddRaw("skipped", internal::SkippedJson(skipped, "path"))
      .str();
}

}  // namespace recordflow::convert
