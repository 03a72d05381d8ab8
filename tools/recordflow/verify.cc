// `recordflow verify FILES...`: checks every CRC of every record and lists every corrupt region.
//
// Reads with CorruptionPolicy::kSkip, so one bad record does not hide the ones after it, and
// prints each region as the reader's reporter hears of it: memory stays flat however damaged
// the file is (the reader's own CorruptionStats keeps only the first kMaxEvents events).
#include <memory>
#include <string>
#include <vector>

#include "common.h"
#include "recordflow/format/record_reader.h"

namespace recordflow::cli {
namespace {

struct VerifyOptions {
  std::vector<std::string> files;
  bool json = false;
  std::optional<format::Compression> compression;
};

// Prints each corruption event as it happens, as a text line or a JSON array element.
class PrintingReporter : public format::CorruptionReporter {
 public:
  PrintingReporter(bool json, std::string path) : json_(json), path_(std::move(path)) {}

  void Report(const format::CorruptionEvent& event) override {
    std::string out;
    if (json_) {
      if (events_ > 0) out += ",";
      out += JsonWriter()
                 .AddUint("offset", event.offset)
                 .AddUint("record_index", event.record_index)
                 .AddUint("bytes_skipped", event.bytes_skipped)
                 .AddString("reason", event.reason)
                 .str();
    } else {
      out = path_ + ": corrupt region at byte offset " + std::to_string(event.offset) +
            " (record index " + std::to_string(event.record_index) + "), " +
            CountOf(event.bytes_skipped, "byte") + " skipped: " + event.reason + "\n";
    }
    ++events_;
    // A failed write leaves stdout's error flag set; RunCommand reports it at the end. The
    // reporter interface has no way to stop the reader.
    WriteOut(out).IgnoreError();
  }

 private:
  bool json_;
  std::string path_;
  uint64_t events_ = 0;
};

struct FileResult {
  uint64_t records_ok = 0;
  uint64_t corrupt_regions = 0;
  uint64_t bytes_skipped = 0;
  Status error;  // a failure that stopped the scan: I/O, not found, corrupt GZIP stream, ...
};

FileResult VerifyFile(const std::string& path, format::RecordReaderOptions options,
                      PrintingReporter* reporter) {
  FileResult result;
  options.on_corruption = format::CorruptionPolicy::kSkip;
  options.verify_checksums = true;
  options.reporter = reporter;
  Result<std::unique_ptr<format::RecordReader>> reader = format::RecordReader::Open(path, options);
  if (!reader.ok()) {
    result.error = reader.status();
    return result;
  }
  std::span<const std::byte> record;
  while (true) {
    Result<bool> more = (*reader)->ReadRecord(&record);
    if (!more.ok()) {
      result.error = more.status();
      break;
    }
    if (!*more) break;
  }
  result.records_ok = (*reader)->records_read();
  result.corrupt_regions = (*reader)->corruption_stats().records_skipped;
  result.bytes_skipped = (*reader)->corruption_stats().bytes_skipped;
  return result;
}

std::string_view Verdict(const FileResult& result) {
  if (!result.error.ok()) return "error";
  return result.corrupt_regions > 0 ? "corrupt" : "ok";
}

int RunVerify(const VerifyOptions& options) {
  format::RecordReaderOptions reader_options;
  reader_options.compression = options.compression;

  int exit_code = kExitOk;
  FileTally total;
  if (options.json) WriteOut("{\"files\":[\n").IgnoreError();
  for (size_t i = 0; i < options.files.size(); ++i) {
    const std::string& path = options.files[i];
    const std::string compression = CompressionLabel(path, options.compression);
    if (options.json) {
      WriteOut(std::string(i > 0 ? ",\n" : "") + "{\"path\":" + JsonQuote(path) +
               ",\"compression\":" + JsonQuote(compression) + ",\"regions\":[")
          .IgnoreError();
    }
    PrintingReporter reporter(options.json, path);
    FileResult result = VerifyFile(path, reader_options, &reporter);
    total.Add(result.error, result.records_ok, result.corrupt_regions, result.bytes_skipped);

    const std::string_view verdict = Verdict(result);
    if (options.json) {
      // The object was opened above; close its "regions" array and add the summary members.
      std::string tail = "],\"records_ok\":" + std::to_string(result.records_ok) +
                         ",\"corrupt_regions\":" + std::to_string(result.corrupt_regions) +
                         ",\"bytes_skipped\":" + std::to_string(result.bytes_skipped) +
                         ",\"status\":" + JsonQuote(verdict);
      if (!result.error.ok()) tail += ",\"error\":" + JsonStatus(result.error);
      WriteOut(tail + "}").IgnoreError();
    } else {
      std::string line = path + ": ";
      if (!result.error.ok()) {
        line += "FAILED (" + std::string(StatusCodeName(result.error.code())) + ")";
      } else {
        line += result.corrupt_regions > 0 ? "CORRUPT" : "OK";
      }
      line += ": " + CountOf(result.records_ok, "record") + " ok, " +
              CountOf(result.corrupt_regions, "corrupt region") + ", " +
              CountOf(result.bytes_skipped, "byte") + " skipped";
      if (compression != "NONE") line += " (offsets are in the decompressed stream)";
      WriteOut(line + "\n").IgnoreError();
    }

    if (!result.error.ok()) {
      exit_code = PrintAndFold(exit_code, result.error);
    } else if (result.corrupt_regions > 0) {
      exit_code = PrintAndFold(
          exit_code,
          DataLossError("'" + path + "' has " + CountOf(result.corrupt_regions, "corrupt region") +
                        " (" + CountOf(result.bytes_skipped, "byte") + " skipped)"));
    }
  }

  if (options.json) {
    WriteOut("\n],\"total\":" + total.Json(options.files.size(), "records_ok") + "}\n")
        .IgnoreError();
  } else if (options.files.size() > 1) {
    WriteOut("total: " + CountOf(options.files.size(), "file") + " (" + std::to_string(total.ok) +
             " ok, " + std::to_string(total.corrupt) + " corrupt, " + std::to_string(total.failed) +
             " failed), " + CountOf(total.records, "record") + " ok, " +
             CountOf(total.corrupt_regions, "corrupt region") + ", " +
             CountOf(total.bytes_skipped, "byte") + " skipped\n")
        .IgnoreError();
  }
  return exit_code;
}

}  // namespace

Command AddVerifyCommand(CLI::App& app) {
  auto options = std::make_shared<VerifyOptions>();
  CLI::App* command = app.add_subcommand(
      "verify", "Check every CRC of every record and list every corrupt region (exit 3 if any)");
  AddRequiredArgument(*command, "files", &options->files, "TFRecord files", "FILE");
  command->add_flag("--json", options->json, "Print one JSON document instead of text");
  AddCompressionOption(*command, &options->compression);
  AddCacheOptions(*command);
  return {command, AfterExpandingFiles(&options->files, [options] { return RunVerify(*options); })};
}

}  // namespace recordflow::cli
