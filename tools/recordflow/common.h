// Shared pieces of the `recordflow` command: exit codes, error printing, JSON and byte
// encodings for output, and the options several subcommands have in common.
//
// Everything here runs on the one thread of the command; none of it is thread-safe.
#pragma once

#include <CLI/CLI.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "recordflow/core/json.h"
#include "recordflow/core/status.h"
#include "recordflow/format/compression.h"
#include "recordflow/format/record_reader.h"

namespace recordflow::cli {

// Exit codes of the command. docs/cli.md documents them; scripts rely on them.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;     // I/O, not found, bad arguments to the library, ...
inline constexpr int kExitUsage = 2;     // the command line itself is wrong
inline constexpr int kExitDataLoss = 3;  // corrupt or truncated data was found
inline constexpr int kExitSkipped = 4;   // convert/extract finished, but skipped some inputs

// The one mapping from a library Status to an exit code: kDataLoss is kExitDataLoss, every
// other error kExitError, OK kExitOk.
int ExitCodeFor(const Status& status);

// Folds the exit codes of several files into one. kExitError outranks kExitDataLoss, so that
// 3 always means "every file was read, and corruption was found".
int CombineExitCodes(int a, int b);

// Prints "recordflow: <StatusCodeName>: <message>" to stderr.
void PrintError(const Status& status);

// Prints the error and returns its exit code (ExitCodeFor): how a command gives up.
int FailWith(const Status& status);

// Prints a per-file error and returns `exit_code` folded with the error's code
// (CombineExitCodes): how a command over several files goes on after one of them failed.
int PrintAndFold(int exit_code, const Status& status);

// The DataLoss a reader under --on-corruption skip leaves behind in `path`: corruption is
// never silent, and scripts see it in the exit status, while `verify` lists the regions.
Status SkippedCorruptionError(std::string_view path, uint64_t regions, uint64_t bytes);

// Prints "recordflow: usage error: <message>" to stderr and returns kExitUsage, for command
// lines that CLI11 accepts but that make no sense together.
int UsageError(std::string_view message);

// Writes `text` to stdout. Errors: kIOError (with errno's text) when stdout fails, e.g. a
// full disk behind a redirection.
Status WriteOut(std::string_view text);

// One subcommand: the CLI::App it registered, and what to run when the user chose it.
struct Command {
  CLI::App* app = nullptr;   // owned by the parent CLI::App
  std::function<int()> run;  // returns the exit code
};

// Each subcommand registers itself on the top-level app. The returned `run` reads the values
// CLI11 parsed into the subcommand's options, so call it only after a successful parse.
Command AddCountCommand(CLI::App& app);
Command AddCatCommand(CLI::App& app);
Command AddVerifyCommand(CLI::App& app);
Command AddIndexCommand(CLI::App& app);
Command AddInspectCommand(CLI::App& app);
Command AddConvertCommand(CLI::App& app);
Command AddExtractCommand(CLI::App& app);
Command AddDoctorCommand(CLI::App& app);
Command AddReshardCommand(CLI::App& app);

// Sets up the top-level app: description, exit codes in the help, and usage errors printed
// as "recordflow: usage error: ...".
void ConfigureApp(CLI::App& app);

// Turns a CLI11 parse failure (or --help) into output and an exit code: 0 for --help, and
// kExitUsage for every real parse error, whatever code CLI11 would have used.
int ExitForParseError(const CLI::App& app, const CLI::ParseError& error);

// Replaces each glob pattern among a command's FILE arguments by its matches (io::ExpandGlobs:
// sorted; a quoted pattern reaches the command unexpanded by the shell). Returns kExitOk, or
// prints the error (a pattern matching nothing: NotFound naming it) and returns its exit code.
int ExpandFileArguments(std::vector<std::string>* files);

// The `run` of a command over FILE arguments: expands the glob patterns among `*files` first
// (ExpandFileArguments), then runs `run`. `files` must outlive the returned function (it is
// a member of the options `run` holds).
std::function<int()> AfterExpandingFiles(std::vector<std::string>* files, std::function<int()> run);

// The totals of a per-file command that reads whole files (count, verify).
struct FileTally {
  uint64_t ok = 0;
  uint64_t corrupt = 0;  // read to the end, with corrupt regions skipped
  uint64_t failed = 0;   // stopped by an error
  uint64_t records = 0;  // read intact, in all files
  uint64_t corrupt_regions = 0;
  uint64_t bytes_skipped = 0;

  // Adds one file: failed when `error` is not OK, else corrupt when `corrupt_regions` > 0; its
  // counts are added either way (a failed file's are those read before the error).
  void Add(const Status& error, uint64_t file_records, uint64_t file_corrupt_regions,
           uint64_t file_bytes_skipped);
  // The "total" object: {"files":N,"files_ok":..,"files_corrupt":..,"files_failed":..,
  // <records_key>:..,"corrupt_regions":..,"bytes_skipped":..}.
  std::string Json(uint64_t files, std::string_view records_key) const;
};

// Writes `text` to stdout; when that fails, prints the error. Returns kExitOk or kExitError.
int WriteOutOrFail(std::string_view text);

// What one file of a per-file command (count, index) produced.
struct FileOutcome {
  JsonWriter json;   // the file's object in the "files" array under --json
  std::string text;  // written to stdout without --json
  Status status;     // not OK: printed to stderr after `text`, folded into the exit code
};

// What RunPerFile gathered.
struct PerFileResult {
  int exit_code = kExitOk;     // the files' codes folded with CombineExitCodes
  bool stdout_failed = false;  // a write failed (already printed): return kExitError now
  std::string json_files;      // "[{...},{...}]": the files' objects, in order
};

// The per-file loop of count and index: calls `one` for each path in order, writes each
// outcome's text (without --json), prints its error and folds the exit codes. Stops at the
// first failed write to stdout.
PerFileResult RunPerFile(const std::vector<std::string>& files, bool json,
                         const std::function<FileOutcome(const std::string& path)>& one);

// Runs `command`, then flushes stdout, so that a failed final write still fails the command.
int RunCommand(const Command& command);

// A validator that accepts what the library's parser `parse` accepts and shows its message
// otherwise, so that the command line and the library never disagree on the spelling of a
// value (the library's Parse* functions are the one table of names).
CLI::Validator ParsedBy(std::function<Status(std::string_view)> parse,
                        std::string description = "");

// The command's required positional argument `name`: one value, or (for a vector) one or more,
// shown in the usage as `type_name` (FILE, SRC, "FILES... OUT_DIR"). Returns the option, for
// further constraints.
CLI::Option* AddRequiredArgument(CLI::App& command, const std::string& name, std::string* value,
                                 const std::string& help, const std::string& type_name);
CLI::Option* AddRequiredArgument(CLI::App& command, const std::string& name,
                                 std::vector<std::string>* values, const std::string& help,
                                 const std::string& type_name);

// --compression {GZIP,ZLIB,NONE}: parsed by format::ParseCompression; a bad name is a usage
// error. Left unset, the library guesses from the file name.
void AddCompressionOption(CLI::App& command, std::optional<format::Compression>* compression);

// --on-corruption raise|skip: parsed by format::ParseCorruptionPolicy.
void AddCorruptionPolicyOption(CLI::App& command, format::CorruptionPolicy* policy);

// --cache-dir DIR and --cache-size SIZE: read remote files (s3://, gs://, http(s)://) through
// the local shard cache (io/shard_cache.h); RunCommand applies them before the command runs.
// Unset, RECORDFLOW_CACHE_DIR / RECORDFLOW_CACHE_SIZE apply.
void AddCacheOptions(CLI::App& command);

// Checks for integer options, run on the text before CLI11 converts it: decimal digits only
// (a leading '-' only where negatives are allowed), no overflow, within [min, max]. The message
// names the accepted range, e.g. "must be an integer from 0 to 18446744073709551615 (got
// '-1')". CLI11's own number checks accept "-1" for unsigned options (wrapping it) and
// saturate values past the type's range.
CLI::Validator UnsignedIn(uint64_t min, uint64_t max = UINT64_MAX);
CLI::Validator SignedIn(int64_t min = INT64_MIN, int64_t max = INT64_MAX);

// "bogus" when argv names no subcommand of `app` (argv[1] is not an option and not a
// command's name); nullopt otherwise.
std::optional<std::string> UnknownCommand(const CLI::App& app, int argc, char** argv);

// "NONE", "GZIP" or "ZLIB": what the reader will use for `path` given the --compression value.
std::string CompressionLabel(std::string_view path,
                             const std::optional<format::Compression>& compression);

// "1 record", "2 records": keeps human-readable summaries grammatical. `plural` defaults to
// `noun` + "s".
std::string CountOf(uint64_t n, std::string_view noun, std::string_view plural = {});

// ---- Output encodings -----------------------------------------------------------------------
// JSON output is written with recordflow/core/json.h (JsonQuote, JsonWriter), compact layout.

// {"code": "<StatusCodeName>", "message": "..."}
std::string JsonStatus(const Status& status);

// Standard base64 (RFC 4648, with padding).
std::string Base64Encode(std::span<const std::byte> data);
// Lowercase hex, two digits per byte, no separators.
std::string HexEncode(std::span<const std::byte> data);

}  // namespace recordflow::cli
