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

// Prints "recordflow: usage error: <message>" to stderr and returns kExitUsage, for command
// lines that CLI11 accepts but that make no sense together.
int UsageError(std::string_view message);

// Writes `text` to stdout. Errors: kIOError (with errno's text) when stdout fails, e.g. a
// full disk behind a redirection.
Status WriteOut(std::string_view text);

// One subcommand: the CLI::App it registered, and what to run when the user chose it.
struct Command {
  CLI::App* app = nullptr;        // owned by the parent CLI::App
  std::function<int()> run;       // returns the exit code
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

// Runs `command`, then flushes stdout, so that a failed final write still fails the command.
int RunCommand(const Command& command);

// --compression {GZIP,ZLIB,NONE}: parsed by format::ParseCompression; a bad name is a usage
// error. Left unset, the library guesses from the file name.
void AddCompressionOption(CLI::App& command, std::optional<format::Compression>* compression);

// --on-corruption raise|skip: parsed by format::ParseCorruptionPolicy.
void AddCorruptionPolicyOption(CLI::App& command, format::CorruptionPolicy* policy);

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

// A JSON string literal (with the quotes). Bytes that are not valid UTF-8 become U+FFFD, so the
// output is valid JSON whatever a path or message contains.
std::string JsonString(std::string_view text);

// {"code": "<StatusCodeName>", "message": "..."}
std::string JsonStatus(const Status& status);

// Builds one JSON object, member by member, in insertion order. Distinct method names rather
// than overloads, because a string literal would otherwise silently pick the bool overload.
class JsonObject {
 public:
  JsonObject& AddString(std::string_view key, std::string_view value);
  JsonObject& AddUint(std::string_view key, uint64_t value);
  JsonObject& AddBool(std::string_view key, bool value);
  // `json` must already be valid JSON (an object, an array, null, ...).
  JsonObject& AddRaw(std::string_view key, std::string_view json);
  // The object, "{...}".
  std::string str() const { return body_ + "}"; }

 private:
  void AddKey(std::string_view key);
  std::string body_ = "{";
};

// Standard base64 (RFC 4648, with padding).
std::string Base64Encode(std::span<const std::byte> data);
// Lowercase hex, two digits per byte, no separators.
std::string HexEncode(std::span<const std::byte> data);

}  // namespace recordflow::cli
