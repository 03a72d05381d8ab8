// `recordflow index FILES...`: writes (or, with --check, checks) DALI-style `.idx` files.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "common.h"
#include "recordflow/format/record_index.h"

namespace recordflow::cli {
namespace {

struct IndexOptions {
  std::vector<std::string> files;
  std::string output;
  bool check = false;
  bool json = false;
  std::optional<format::Compression> compression;
};

// A whole stale index could mismatch on millions of lines; the first few locate the problem.
constexpr size_t kMaxMismatchesShown = 10;

struct Mismatch {
  uint64_t line = 0;  // 1-based line of the index file; record `line - 1`
  std::optional<format::IndexEntry> in_index;
  std::optional<format::IndexEntry> in_file;
};

std::string EntryText(const std::optional<format::IndexEntry>& entry) {
  if (!entry) return "nothing";
  return "'" + std::to_string(entry->offset) + " " + std::to_string(entry->size) + "'";
}

std::string EntryJson(const std::optional<format::IndexEntry>& entry) {
  if (!entry) return "null";
  return JsonWriter().AddUint("offset", entry->offset).AddUint("size", entry->size).str();
}

struct CheckResult {
  uint64_t index_entries = 0;
  uint64_t file_records = 0;
  uint64_t mismatch_count = 0;
  std::vector<Mismatch> first_mismatches;
};

CheckResult CompareEntries(const std::vector<format::IndexEntry>& in_index,
                           const std::vector<format::IndexEntry>& in_file) {
  CheckResult result{in_index.size(), in_file.size(), 0, {}};
  const size_t n = std::max(in_index.size(), in_file.size());
  for (size_t i = 0; i < n; ++i) {
    Mismatch m{i + 1, std::nullopt, std::nullopt};
    if (i < in_index.size()) m.in_index = in_index[i];
    if (i < in_file.size()) m.in_file = in_file[i];
    if (m.in_index == m.in_file) continue;
    ++result.mismatch_count;
    if (result.first_mismatches.size() < kMaxMismatchesShown) {
      result.first_mismatches.push_back(m);
    }
  }
  return result;
}

// Builds the index from the records (checking every CRC: an index of corrupt data would send
// readers to garbage) and writes it atomically.
Result<uint64_t> WriteIndex(const std::string& path, const std::string& index_path,
                            const format::RecordReaderOptions& reader_options) {
  RF_ASSIGN_OR_RETURN(auto entries, format::BuildIndex(path, reader_options));
  RF_RETURN_IF_ERROR(format::WriteIndexFile(index_path, entries));
  return entries.size();
}

Result<CheckResult> CheckIndex(const std::string& path, const std::string& index_path,
                               const format::RecordReaderOptions& reader_options) {
  RF_ASSIGN_OR_RETURN(auto in_index, format::ReadIndexFile(index_path));
  RF_ASSIGN_OR_RETURN(auto in_file, format::BuildIndex(path, reader_options));
  return CompareEntries(in_index, in_file);
}

// A mismatched index is reported as data loss, as ReadIndexFile reports a malformed one: a
// reader trusting it would fail on, or silently miss, records that are in the file.
Status MismatchStatus(const std::string& path, const std::string& index_path,
                      const CheckResult& check) {
  const Mismatch& first = check.first_mismatches.front();
  return DataLossError(
      "index '" + index_path + "' does not match '" + path +
      "': " + CountOf(check.mismatch_count, "mismatched entry", "mismatched entries") +
      " (index has " + CountOf(check.index_entries, "entry", "entries") + ", file has " +
      CountOf(check.file_records, "record") + "); first at line " + std::to_string(first.line) +
      ": index has " + EntryText(first.in_index) + ", file has " + EntryText(first.in_file));
}

int RunIndex(const IndexOptions& options) {
  if (!options.output.empty() && options.files.size() != 1) {
    return UsageError("--output needs exactly one FILE (got " +
                      std::to_string(options.files.size()) + ")");
  }
  format::RecordReaderOptions reader_options;
  reader_options.compression = options.compression;

  const PerFileResult files = RunPerFile(options.files, options.json, [&](const std::string& path) {
    FileOutcome out;
    const std::string index_path = options.output.empty() ? path + ".idx" : options.output;
    JsonWriter& json = out.json;
    json.AddString("path", path).AddString("index_path", index_path);
    std::string& text = out.text;
    Status& status = out.status;
    bool has_status_member = false;  // a mismatch reports "mismatch", not "error"
    if (options.check) {
      Result<CheckResult> check = CheckIndex(path, index_path, reader_options);
      status = check.status();
      if (check.ok()) {
        std::string mismatches;
        for (const Mismatch& m : check->first_mismatches) {
          if (!mismatches.empty()) mismatches += ',';
          mismatches += JsonWriter()
                            .AddUint("line", m.line)
                            .AddRaw("index", EntryJson(m.in_index))
                            .AddRaw("file", EntryJson(m.in_file))
                            .str();
          text += index_path + ": line " + std::to_string(m.line) + ": index has " +
                  EntryText(m.in_index) + ", file has " + EntryText(m.in_file) + "\n";
        }
        if (check->mismatch_count > check->first_mismatches.size()) {
          text += index_path + ": ... and " +
                  std::to_string(check->mismatch_count - check->first_mismatches.size()) +
                  " more\n";
        }
        const bool match = check->mismatch_count == 0;
        text += index_path + ": " + (match ? "OK" : "MISMATCH") + ": index has " +
                CountOf(check->index_entries, "entry", "entries") + ", '" + path + "' has " +
                CountOf(check->file_records, "record") + "\n";
        json.AddString("status", match ? "ok" : "mismatch")
            .AddUint("index_entries", check->index_entries)
            .AddUint("records", check->file_records)
            .AddUint("mismatch_count", check->mismatch_count)
            .AddRaw("mismatches", "[" + mismatches + "]");
        has_status_member = true;
        if (!match) status = MismatchStatus(path, index_path, *check);
      }
    } else {
      Result<uint64_t> records = WriteIndex(path, index_path, reader_options);
      status = records.status();
      if (records.ok()) {
        text = "wrote " + index_path + " (" + CountOf(*records, "record") + ")\n";
        json.AddString("status", "written").AddUint("records", *records);
      }
    }
    if (!status.ok()) {
      if (!has_status_member) json.AddString("status", "error");
      json.AddRaw("error", JsonStatus(status));
    }
    return out;
  });
  if (files.stdout_failed) return kExitError;
  if (options.json) {
    if (WriteOutOrFail(JsonWriter().AddRaw("files", files.json_files).str() + "\n") != kExitOk) {
      return kExitError;
    }
  }
  return files.exit_code;
}

}  // namespace

Command AddIndexCommand(CLI::App& app) {
  auto options = std::make_shared<IndexOptions>();
  CLI::App* command = app.add_subcommand(
      "index", "Write FILE.idx (DALI tfrecord2idx format: 'offset size' per record)");
  AddRequiredArgument(*command, "files", &options->files, "Uncompressed TFRecord files", "FILE");
  command
      ->add_option("-o,--output", options->output,
                   "Index path (only with a single FILE); default: FILE.idx")
      ->type_name("PATH");
  command->add_flag("--check", options->check,
                    "Check the existing index against the file instead of writing it (exit 3 "
                    "on any mismatch)");
  command->add_flag("--json", options->json, "Print one JSON document instead of text");
  AddCompressionOption(*command, &options->compression);
  AddCacheOptions(*command);
  return {command, AfterExpandingFiles(&options->files, [options] { return RunIndex(*options); })};
}

}  // namespace recordflow::cli
