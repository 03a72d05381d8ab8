// `recordflow cat FILE`: prints record payloads, one per line (or back to back for raw).
#include <limits>
#include <memory>
#include <string>

#include "common.h"
#include "recordflow/format/record_reader.h"

namespace recordflow::cli {
namespace {

struct CatOptions {
  std::string file;
  std::string format = "base64";
  bool json = false;
  uint64_t limit = std::numeric_limits<uint64_t>::max();
  uint64_t skip = 0;
  format::CorruptionPolicy on_corruption = format::CorruptionPolicy::kRaise;
  std::optional<format::Compression> compression;
};

// One output unit for a record. Text formats end in a newline; raw adds nothing, so a single
// record (--skip N --limit 1) can be extracted byte for byte.
std::string FormatRecord(const CatOptions& options, uint64_t index, uint64_t offset,
                         std::span<const std::byte> payload) {
  if (options.format == "raw") {
    return std::string(reinterpret_cast<const char*>(payload.data()), payload.size());
  }
  if (options.format == "hex") return HexEncode(payload) + "\n";
  if (options.format == "json") {
    return JsonWriter()
               .AddUint("index", index)
               .AddUint("offset", offset)
               .AddUint("size", payload.size())
               .AddString("data", Base64Encode(payload))
               .str() +
           "\n";
  }
  return Base64Encode(payload) + "\n";
}

// Reads only as far as --skip + --limit needs: records beyond are neither read nor checked.
Status CatRecords(const CatOptions& options, format::RecordReader& reader) {
  std::span<const std::byte> record;
  uint64_t index = 0;
  uint64_t printed = 0;
  while (printed < options.limit) {
    RF_ASSIGN_OR_RETURN(bool more, reader.ReadRecord(&record));
    if (!more) break;
    if (index++ < options.skip) continue;
    RF_RETURN_IF_ERROR(
        WriteOut(FormatRecord(options, index - 1, reader.last_record_offset(), record)));
    ++printed;
  }
  return Status::OK();
}

int RunCat(CatOptions options) {
  if (options.json) options.format = "json";
  format::RecordReaderOptions reader_options;
  reader_options.compression = options.compression;
  reader_options.on_corruption = options.on_corruption;
  Result<std::unique_ptr<format::RecordReader>> reader =
      format::RecordReader::Open(options.file, reader_options);
  if (!reader.ok()) return FailWith(reader.status());
  if (Status status = CatRecords(options, **reader); !status.ok()) return FailWith(status);
  const format::CorruptionStats& stats = (*reader)->corruption_stats();
  if (stats.records_skipped > 0) {
    return FailWith(
        SkippedCorruptionError(options.file, stats.records_skipped, stats.bytes_skipped));
  }
  return kExitOk;
}

}  // namespace

Command AddCatCommand(CLI::App& app) {
  auto options = std::make_shared<CatOptions>();
  CLI::App* command = app.add_subcommand("cat", "Print record payloads, one per line");
  AddRequiredArgument(*command, "file", &options->file, "TFRecord file", "FILE");
  CLI::Option* format =
      command
          ->add_option("--format", options->format,
                       "base64 (default), hex, json (one object per line: index, offset, "
                       "size, base64 data), or raw (payload bytes, no separator)")
          ->type_name("FORMAT")
          ->check(CLI::IsMember({"base64", "hex", "json", "raw"}));
  command->add_flag("--json", options->json, "Same as --format json")->excludes(format);
  command->add_option("--limit", options->limit, "Print at most N records (default: all)")
      ->type_name("N")
      ->check(UnsignedIn(0));
  command->add_option("--skip", options->skip, "Skip the first N records")
      ->type_name("N")
      ->check(UnsignedIn(0));
  AddCorruptionPolicyOption(*command, &options->on_corruption);
  AddCompressionOption(*command, &options->compression);
  AddCacheOptions(*command);
  return {command, [options] { return RunCat(*options); }};
}

}  // namespace recordflow::cli
