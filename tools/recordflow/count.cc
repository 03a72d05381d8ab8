// `recordflow count FILES...`: the number of records in each file, and the total.
#include <memory>
#include <string>
#include <vector>

#include "common.h"
#include "recordflow/format/record_reader.h"

namespace recordflow::cli {
namespace {

struct CountOptions {
  std::vector<std::string> files;
  bool json = false;
  bool no_verify = false;
  format::CorruptionPolicy on_corruption = format::CorruptionPolicy::kRaise;
  std::optional<format::Compression> compression;
};

struct FileCount {
  uint64_t records = 0;
  uint64_t corrupt_regions = 0;
  uint64_t bytes_skipped = 0;
};

// Counting means reading every record: the framing has no record count, and the CRCs (unless
// --no-verify) are what make the count trustworthy.
Result<FileCount> CountRecords(const std::string& path,
                               const format::RecordReaderOptions& options) {
  RF_ASSIGN_OR_RETURN(auto reader, format::RecordReader::Open(path, options));
  std::span<const std::byte> record;
  while (true) {
    RF_ASSIGN_OR_RETURN(bool more, reader->ReadRecord(&record));
    if (!more) break;
  }
  const format::CorruptionStats& stats = reader->corruption_stats();
  return FileCount{reader->records_read(), stats.records_skipped, stats.bytes_skipped};
}

int RunCount(const CountOptions& options) {
  format::RecordReaderOptions reader_options;
  reader_options.compression = options.compression;
  reader_options.verify_checksums = !options.no_verify;
  reader_options.on_corruption = options.on_corruption;

  FileTally total;
  const PerFileResult files = RunPerFile(options.files, options.json, [&](const std::string& path) {
    FileOutcome out;
    Result<FileCount> count = CountRecords(path, reader_options);
    out.json.AddString("path", path)
        .AddString("compression", CompressionLabel(path, options.compression));
    if (!count.ok()) {
      total.Add(count.status(), 0, 0, 0);
      out.status = count.status();
      out.json.AddString("status", "error").AddRaw("error", JsonStatus(count.status()));
      return out;
    }
    total.Add(Status::OK(), count->records, count->corrupt_regions, count->bytes_skipped);
    const bool corrupt = count->corrupt_regions > 0;
    out.json.AddString("status", corrupt ? "corrupt" : "ok")
        .AddUint("records", count->records)
        .AddUint("corrupt_regions", count->corrupt_regions)
        .AddUint("bytes_skipped", count->bytes_skipped);
    out.text = std::to_string(count->records) + " " + path;
    if (corrupt) {
      out.text += " (skipped " + CountOf(count->corrupt_regions, "corrupt region") + ", " +
                  CountOf(count->bytes_skipped, "byte") + ")";
      // Under --on-corruption skip the count is still printed, and the skip is data loss.
      out.status = SkippedCorruptionError(path, count->corrupt_regions, count->bytes_skipped);
    }
    out.text += "\n";
    return out;
  });
  if (files.stdout_failed) return kExitError;

  std::string summary;
  if (options.json) {
    summary = JsonWriter()
                  .AddRaw("files", files.json_files)
                  .AddRaw("total", total.Json(options.files.size(), "records"))
                  .str() +
              "\n";
  } else if (options.files.size() > 1) {
    // As wc(1): a total line only when there is something to add up.
    summary = std::to_string(total.records) + " total\n";
  }
  if (WriteOutOrFail(summary) != kExitOk) return kExitError;
  return files.exit_code;
}

}  // namespace

Command AddCountCommand(CLI::App& app) {
  auto options = std::make_shared<CountOptions>();
  CLI::App* command = app.add_subcommand("count", "Count the records in each file, and in all");
  AddRequiredArgument(*command, "files", &options->files, "TFRecord files", "FILE");
  command->add_flag("--json", options->json, "Print one JSON document instead of text");
  command->add_flag("--no-verify", options->no_verify,
                    "Skip CRC checks (faster on CPUs without hardware CRC32C; unsafe)");
  AddCorruptionPolicyOption(*command, &options->on_corruption);
  AddCompressionOption(*command, &options->compression);
  AddCacheOptions(*command);
  return {command, AfterExpandingFiles(&options->files, [options] { return RunCount(*options); })};
}

}  // namespace recordflow::cli
