#include "common.h"

#include <csignal>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <new>
#include <utility>

#include "recordflow/io/glob.h"
#include "recordflow/io/shard_cache.h"

namespace recordflow::cli {

CLI::Validator ParsedBy(std::function<Status(std::string_view)> parse, std::string description) {
  return CLI::Validator(
      [parse = std::move(parse)](std::string& value) -> std::string {
        Status status = parse(value);
        return status.ok() ? std::string() : status.message();
      },
      std::move(description));
}

int ExitCodeFor(const Status& status) {
  if (status.ok()) return kExitOk;
  if (status.code() == StatusCode::kDataLoss) return kExitDataLoss;
  return kExitError;
}

int CombineExitCodes(int a, int b) {
  if (a == kExitError || b == kExitError) return kExitError;
  if (a == kExitUsage || b == kExitUsage) return kExitUsage;
  if (a == kExitDataLoss || b == kExitDataLoss) return kExitDataLoss;
  return kExitOk;
}

void PrintError(const Status& status) {
  // Flush stdout first so that, on a terminal, the error appears after the output it follows.
  std::fflush(stdout);
  std::fprintf(stderr, "recordflow: %s: %s\n", std::string(StatusCodeName(status.code())).c_str(),
               status.message().c_str());
}

int FailWith(const Status& status) {
  PrintError(status);
  return ExitCodeFor(status);
}

int PrintAndFold(int exit_code, const Status& status) {
  PrintError(status);
  return CombineExitCodes(exit_code, ExitCodeFor(status));
}

Status SkippedCorruptionError(std::string_view path, uint64_t regions, uint64_t bytes) {
  return DataLossError("skipped " + CountOf(regions, "corrupt region") + " (" +
                       CountOf(bytes, "byte") + ") in '" + std::string(path) +
                       "'; run 'recordflow verify' to list them");
}

int UsageError(std::string_view message) {
  std::fflush(stdout);
  std::fprintf(stderr, "recordflow: usage error: %.*s\n", static_cast<int>(message.size()),
               message.data());
  return kExitUsage;
}

Status WriteOut(std::string_view text) {
  if (text.empty()) return Status::OK();
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size()) {
    return IOError(std::string("writing to standard output: ") + std::strerror(errno));
  }
  return Status::OK();
}

void ConfigureApp(CLI::App& app) {
  app.description(
      "recordflow: count, print, verify, index and inspect TFRecord files, convert image datasets "
      "into them and extract images back (no TensorFlow needed).");
  app.require_subcommand(1);
  app.footer(
      "Exit status: 0 success, 1 error (I/O, file not found, bad argument), 2 usage error,\n"
      "3 data loss (corrupt or truncated data found), 4 convert/extract skipped some inputs.\n"
      "Run 'recordflow COMMAND --help' for a command's options; docs/cli.md has the full "
      "reference.");
  app.failure_message([](const CLI::App*, const CLI::Error& error) {
    return std::string("recordflow: usage error: ") + error.what() +
           "\nRun 'recordflow --help' or 'recordflow COMMAND --help' for usage.\n";
  });
}

int ExitForParseError(const CLI::App& app, const CLI::ParseError& error) {
  // CLI11 uses its own exit codes (106 for a bad value, ...); the documented contract is 2.
  const int cli11_code = app.exit(error);
  return cli11_code == 0 ? kExitOk : kExitUsage;
}

int ExpandFileArguments(std::vector<std::string>* files) {
  Result<std::vector<std::string>> expanded = io::ExpandGlobs(*files);
  if (!expanded.ok()) return FailWith(expanded.status());
  *files = std::move(*expanded);
  return kExitOk;
}

std::function<int()> AfterExpandingFiles(std::vector<std::string>* files,
                                         std::function<int()> run) {
  return [files, run = std::move(run)] {
    if (int rc = ExpandFileArguments(files); rc != kExitOk) return rc;
    return run();
  };
}

void FileTally::Add(const Status& error, uint64_t file_records, uint64_t file_corrupt_regions,
                    uint64_t file_bytes_skipped) {
  if (!error.ok()) {
    ++failed;
  } else if (file_corrupt_regions > 0) {
    ++corrupt;
  } else {
    ++ok;
  }
  records += file_records;
  corrupt_regions += file_corrupt_regions;
  bytes_skipped += file_bytes_skipped;
}

std::string FileTally::Json(uint64_t files, std::string_view records_key) const {
  return JsonWriter()
      .AddUint("files", files)
      .AddUint("files_ok", ok)
      .AddUint("files_corrupt", corrupt)
      .AddUint("files_failed", failed)
      .AddUint(records_key, records)
      .AddUint("corrupt_regions", corrupt_regions)
      .AddUint("bytes_skipped", bytes_skipped)
      .str();
}

namespace {
struct CacheArgs {
  std::string dir;
  std::string size;
};
CacheArgs& Cache() {
  static CacheArgs args;
  return args;
}
}  // namespace

void AddCacheOptions(CLI::App& command) {
  command.add_option("--cache-dir", Cache().dir,
                     "Keep whole copies of remote files in this folder (validated by ETag and "
                     "size on each open; docs/remote-storage.md)");
  command
      .add_option("--cache-size", Cache().size,
                  "Limit of --cache-dir in bytes, or with K/M/G/T (default 10G); least "
                  "recently used files are evicted")
      ->check(ParsedBy(
          [](std::string_view text) { return io::ParseByteSize(std::string(text)).status(); }));
}

int RunCommand(const Command& command) {
  if (!Cache().dir.empty() || !Cache().size.empty()) {
    io::ShardCacheOptions cache = io::GetShardCache();
    if (!Cache().dir.empty()) cache.dir = Cache().dir;
    if (!Cache().size.empty()) cache.max_bytes = *io::ParseByteSize(Cache().size);  // checked
    if (Status s = io::SetShardCache(cache); !s.ok()) return FailWith(s);
  }
  // Over `ulimit -f` the kernel sends SIGXFSZ, whose default action kills the process and
  // leaves its temporary files behind. Ignored, the write fails with EFBIG instead, which the
  // library reports as kResourceExhausted after removing the temporary file.
  std::signal(SIGXFSZ, SIG_IGN);
  int exit_code;
  try {
    exit_code = command.run();
  } catch (const std::bad_alloc&) {
    // The library turns its own large allocations into kResourceExhausted; this catches the
    // rest (a small allocation on an exhausted machine) so the command still exits cleanly.
    PrintError(ResourceExhaustedError("out of memory in '" + command.app->get_name() + "'"));
    return kExitError;
  }
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    exit_code = PrintAndFold(
        exit_code, IOError(std::string("writing to standard output: ") + std::strerror(errno)));
  }
  return exit_code;
}

CLI::Option* AddRequiredArgument(CLI::App& command, const std::string& name, std::string* value,
                                 const std::string& help, const std::string& type_name) {
  return command.add_option(name, *value, help)->required()->type_name(type_name);
}

CLI::Option* AddRequiredArgument(CLI::App& command, const std::string& name,
                                 std::vector<std::string>* values, const std::string& help,
                                 const std::string& type_name) {
  return command.add_option(name, *values, help)->required()->type_name(type_name);
}

void AddCompressionOption(CLI::App& command, std::optional<format::Compression>* compression) {
  command
      .add_option_function<std::string>(
          "--compression",
          [compression](const std::string& name) {
            // The validator below has already accepted `name`.
            *compression = *format::ParseCompression(name);
          },
          "Compression of the files; default: from the extension (.gz GZIP, .zz ZLIB, "
          "else NONE)")
      ->type_name("{GZIP,ZLIB,NONE}")
      ->check(
          ParsedBy([](std::string_view v) { return format::ParseCompression(v).status(); }, ""));
}

void AddCorruptionPolicyOption(CLI::App& command, format::CorruptionPolicy* policy) {
  command
      .add_option_function<std::string>(
          "--on-corruption",
          [policy](const std::string& name) { *policy = *format::ParseCorruptionPolicy(name); },
          "raise: stop at the first corrupt record (default); skip: skip corrupt regions, "
          "report them, and exit 3 at the end")
      ->type_name("{raise,skip}")
      ->check(ParsedBy([](std::string_view v) { return format::ParseCorruptionPolicy(v).status(); },
                       ""));
}

namespace {

std::string RangeMessage(std::string_view range, const std::string& got) {
  std::string shown = got.size() > 40 ? got.substr(0, 40) + "..." : got;
  return "must be an integer from " + std::string(range) + " (got '" + shown + "')";
}

// Parses optional '-' then decimal digits into a magnitude; false on overflow or other text.
bool ParseMagnitude(const std::string& text, bool* negative, uint64_t* magnitude) {
  size_t i = 0;
  *negative = false;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) {
    *negative = text[i] == '-';
    ++i;
  }
  if (i == text.size()) return false;
  uint64_t v = 0;
  for (; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (v > (UINT64_MAX - digit) / 10) return false;
    v = v * 10 + digit;
  }
  *magnitude = v;
  return true;
}

// A validator of decimal integers: `accept(negative, magnitude)` says whether the value is in
// `range`; text that is no integer, or one out of range, gets RangeMessage.
CLI::Validator IntegerIn(const std::string& range,
                         std::function<bool(bool negative, uint64_t magnitude)> accept) {
  return CLI::Validator(
      [range, accept = std::move(accept)](std::string& value) -> std::string {
        bool negative = false;
        uint64_t v = 0;
        if (!ParseMagnitude(value, &negative, &v) || !accept(negative, v)) {
          return RangeMessage(range, value);
        }
        return std::string();
      },
      "INT in [" + range + "]");
}

}  // namespace

CLI::Validator UnsignedIn(uint64_t min, uint64_t max) {
  return IntegerIn(std::to_string(min) + " to " + std::to_string(max),
                   [min, max](bool negative, uint64_t v) {
                     return (!negative || v == 0) && v >= min && v <= max;  // "-0" is 0
                   });
}

CLI::Validator SignedIn(int64_t min, int64_t max) {
  return IntegerIn(
      std::to_string(min) + " to " + std::to_string(max), [min, max](bool negative, uint64_t v) {
        const uint64_t limit = negative ? uint64_t{1} << 63 : uint64_t{INT64_MAX};
        if (v > limit) return false;
        const int64_t signed_value =
            negative ? (v == (uint64_t{1} << 63) ? INT64_MIN : -static_cast<int64_t>(v))
                     : static_cast<int64_t>(v);
        return signed_value >= min && signed_value <= max;
      });
}

std::optional<std::string> UnknownCommand(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return std::nullopt;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->check_name(argv[1])) return std::nullopt;
  }
  return std::string(argv[1]);
}

std::string CompressionLabel(std::string_view path,
                             const std::optional<format::Compression>& compression) {
  std::string_view name =
      format::CompressionName(compression.value_or(format::CompressionFromPath(path)));
  return name.empty() ? "NONE" : std::string(name);
}

std::string CountOf(uint64_t n, std::string_view noun, std::string_view plural) {
  std::string out = std::to_string(n);
  out += ' ';
  if (n == 1) {
    out += noun;
  } else if (plural.empty()) {
    out += noun;
    out += 's';
  } else {
    out += plural;
  }
  return out;
}

int WriteOutOrFail(std::string_view text) {
  Status written = WriteOut(text);
  if (written.ok()) return kExitOk;
  PrintError(written);
  return kExitError;
}

PerFileResult RunPerFile(const std::vector<std::string>& files, bool json,
                         const std::function<FileOutcome(const std::string& path)>& one) {
  PerFileResult result;
  std::string objects;
  for (const std::string& path : files) {
    FileOutcome outcome = one(path);
    if (!json && WriteOutOrFail(outcome.text) != kExitOk) {
      result.stdout_failed = true;
      return result;
    }
    if (!outcome.status.ok()) result.exit_code = PrintAndFold(result.exit_code, outcome.status);
    if (!objects.empty()) objects += ',';
    objects += outcome.json.str();
  }
  result.json_files = "[" + objects + "]";
  return result;
}

std::string JsonStatus(const Status& status) {
  return JsonWriter()
      .AddString("code", StatusCodeName(status.code()))
      .AddString("message", status.message())
      .str();
}

std::string Base64Encode(std::span<const std::byte> data) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= data.size(); i += 3) {
    const uint32_t v = (std::to_integer<uint32_t>(data[i]) << 16) |
                       (std::to_integer<uint32_t>(data[i + 1]) << 8) |
                       std::to_integer<uint32_t>(data[i + 2]);
    out += kAlphabet[(v >> 18) & 0x3F];
    out += kAlphabet[(v >> 12) & 0x3F];
    out += kAlphabet[(v >> 6) & 0x3F];
    out += kAlphabet[v & 0x3F];
  }
  const size_t rest = data.size() - i;
  if (rest > 0) {
    uint32_t v = std::to_integer<uint32_t>(data[i]) << 16;
    if (rest == 2) v |= std::to_integer<uint32_t>(data[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 0x3F];
    out += kAlphabet[(v >> 12) & 0x3F];
    out += rest == 2 ? kAlphabet[(v >> 6) & 0x3F] : '=';
    out += '=';
  }
  return out;
}

std::string HexEncode(std::span<const std::byte> data) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(data.size() * 2);
  for (std::byte b : data) {
    const auto v = std::to_integer<unsigned>(b);
    out += kHex[v >> 4];
    out += kHex[v & 0xF];
  }
  return out;
}

}  // namespace recordflow::cli
