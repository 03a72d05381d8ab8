// `recordflow inspect FILES...`: what the tf.train.Example records of the files look like (keys,
// types, presence, value counts, sizes) and the parsing spec that would read them.
//
// The files are read as one dataset (shards of it, typically): a single schema covers them all,
// and --limit counts records across files.
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "common.h"
#include "recordflow/example/schema.h"
#include "recordflow/format/record_reader.h"
#include "recordflow/io/filesystem.h"

namespace recordflow::cli {
namespace {

using example::FeatureSpec;
using example::KeyStats;
using example::Schema;

struct InspectOptions {
  std::vector<std::string> files;
  uint64_t limit = std::numeric_limits<uint64_t>::max();
  bool json = false;
  std::optional<format::Compression> compression;
};

struct FileScan {
  std::string path;
  std::string compression;
  std::optional<uint64_t> file_bytes;
  uint64_t records = 0;
  bool read = false;  // false: --limit was reached before this file
  Status error;       // what stopped the scan of this file: not found, corrupt framing, ...
};

// Where the first malformed record is, in terms a user can act on.
struct MalformedOrigin {
  std::string path;
  uint64_t record_in_file = 0;
};

// Reads records of `scan.path` into `inference` until the file ends or `*budget` runs out.
// Records before a framing error stay in the schema: they were read and checked.
void ScanFile(const InspectOptions& options, example::SchemaInference& inference, uint64_t* budget,
              FileScan& scan) {
  format::RecordReaderOptions reader_options;
  reader_options.compression = options.compression;
  Result<std::unique_ptr<format::RecordReader>> reader =
      format::RecordReader::Open(scan.path, reader_options);
  if (!reader.ok()) {
    scan.error = reader.status();
    return;
  }
  const Result<io::FileInfo> info = io::StatPath(scan.path);  // local or URL
  if (info.ok()) scan.file_bytes = info->size;
  if (*budget == 0) return;
  scan.read = true;
  std::span<const std::byte> record;
  while (*budget > 0) {
    Result<bool> more = (*reader)->ReadRecord(&record);
    if (!more.ok()) {
      scan.error = more.status();
      break;
    }
    if (!*more) break;
    inference.Add(record);
    ++scan.records;
    --*budget;
  }
}

// "0.5", "2.33", "1": two decimals at most, no trailing zeros.
std::string FormatNumber(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.2f", value);
  std::string out = buffer;
  if (out.find('.') != std::string::npos) {
    while (out.back() == '0') out.pop_back();
    if (out.back() == '.') out.pop_back();
  }
  return out;
}

// A JSON number for a ratio or mean, in the shortest form that reads back as the same double
// (so a consumer can compare 6 / 7 exactly). Never NaN or infinite: the schema's means are 0
// when there is nothing to divide.
std::string JsonNumber(double value) {
  char buffer[64];
  const std::to_chars_result result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

std::string FormatPercent(double fraction) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.1f%%", 100.0 * fraction);
  return buffer;
}

// "int64", or "float32|int64" for a key whose kinds conflict, or "none" for a key that only
// ever held empty Features.
std::string TypeLabel(const KeyStats& key) {
  std::string out;
  for (example::ListKind kind : key.kinds()) {
    if (!out.empty()) out += '|';
    out += example::ListKindName(kind);
  }
  return out.empty() ? "none" : out;
}

// The Python expression for a spec in the recordflow package, e.g. `rf.FixedLen([], "int64")`.
std::string SpecToPython(const FeatureSpec& spec) {
  const std::string dtype = "\"" + std::string(example::DTypeName(spec.dtype)) + "\"";
  if (spec.kind == FeatureSpec::Kind::kVarLen) return "rf.VarLen(" + dtype + ")";
  std::string shape = "[";
  for (size_t i = 0; i < spec.shape.size(); ++i) {
    if (i > 0) shape += ", ";
    shape += std::to_string(spec.shape[i]);
  }
  return "rf.FixedLen(" + shape + "], " + dtype + ")";
}

// Why a key has no proposed spec.
std::string NoSpecReason(const KeyStats& key) {
  return key.conflicting() ? "conflicting types" : "only empty Features, no type";
}

// Keys are arbitrary bytes; print them bare when that is unambiguous, else quoted and escaped.
// (A JSON string literal is also a valid Python one, which the spec block relies on.)
std::string DisplayKey(std::string_view key) {
  bool plain = !key.empty();
  for (char c : key) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f || c == '"' || c == '\\') plain = false;
  }
  const std::string quoted = JsonQuote(key);
  // JsonQuote replaces invalid UTF-8; a key it changed is not plain either.
  if (plain && quoted.size() != key.size() + 2) plain = false;
  return plain ? std::string(key) : quoted;
}

// Terminal columns a UTF-8 string takes, near enough for alignment: one per code point.
size_t DisplayWidth(std::string_view text) {
  size_t width = 0;
  for (char c : text) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++width;
  }
  return width;
}

std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], DisplayWidth(row[c]));
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(widths[c] - DisplayWidth(row[c]) + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string FileLine(const FileScan& scan) {
  std::string line = scan.path + ": ";
  if (!scan.error.ok() && !scan.file_bytes) {
    return line + "FAILED (" + std::string(StatusCodeName(scan.error.code())) + ")\n";
  }
  line += scan.file_bytes ? CountOf(*scan.file_bytes, "byte") : "size unknown";
  line += ", " + scan.compression + ", ";
  if (!scan.read) return line + "not read (--limit reached)\n";
  line += CountOf(scan.records, "record") + " scanned";
  if (!scan.error.ok()) {
    line += ", then FAILED (" + std::string(StatusCodeName(scan.error.code())) + ")";
  }
  return line + "\n";
}

std::string TextReport(const std::vector<FileScan>& scans, const Schema& schema,
                       const std::optional<MalformedOrigin>& origin, uint64_t max_keys) {
  std::string out;
  for (const FileScan& scan : scans) out += FileLine(scan);
  out += "records: " + std::to_string(schema.records);
  if (schema.records > 0) {
    out += " (size min " + std::to_string(schema.min_record_bytes) + ", mean " +
           FormatNumber(schema.mean_record_bytes()) + ", max " +
           std::to_string(schema.max_record_bytes) + ", total " +
           CountOf(schema.total_record_bytes, "byte") + ")";
  }
  out += "\n";
  out += "examples: " + std::to_string(schema.examples) + " well-formed (" +
         std::to_string(schema.empty_examples) + " without features), " +
         std::to_string(schema.malformed_records) + " malformed\n";
  if (origin) {
    out += "first malformed record: record " + std::to_string(origin->record_in_file) + " of '" +
           origin->path + "': " + schema.first_malformed_error.ToString() + "\n";
  }
  if (schema.untracked_features > 0) {
    out += "note: more than " + std::to_string(max_keys) + " distinct keys; " +
           CountOf(schema.untracked_features, "feature entry", "feature entries") +
           " of later keys are not described\n";
  }
  if (schema.keys.empty()) return out + "no features found\n";

  std::vector<std::vector<std::string>> rows = {
      {"key", "type", "present", "values min/mean/max", "bytes/value", "spec"}};
  for (const KeyStats& key : schema.keys) {
    std::vector<std::string> row = {DisplayKey(key.key), TypeLabel(key),
                                    FormatPercent(schema.presence(key))};
    if (key.records_present() > 0) {
      row.push_back(std::to_string(key.min_values) + " / " + FormatNumber(key.mean_values()) +
                    " / " + std::to_string(key.max_values));
    } else {
      row.push_back("-");
    }
    row.push_back(key.bytes_values > 0 ? FormatNumber(key.mean_value_bytes()) : "-");
    std::optional<FeatureSpec> spec = schema.ProposeSpec(key);
    row.push_back(spec ? SpecToPython(*spec) : "- (" + NoSpecReason(key) + ")");
    rows.push_back(std::move(row));
  }
  out += "\n" + Table(rows);

  // The same proposal as a block to paste into Python.
  out += "\nspec = {\n";
  for (const KeyStats& key : schema.keys) {
    std::optional<FeatureSpec> spec = schema.ProposeSpec(key);
    if (spec) {
      out += "    " + JsonQuote(key.key) + ": " + SpecToPython(*spec) + ",\n";
    } else {
      out += "    # " + JsonQuote(key.key) + ": left out, " + NoSpecReason(key) + "\n";
    }
  }
  return out + "}\n";
}

std::string JsonSpec(const FeatureSpec& spec) {
  std::string shape = "[";
  for (size_t i = 0; i < spec.shape.size(); ++i) {
    if (i > 0) shape += ",";
    shape += std::to_string(spec.shape[i]);
  }
  shape += "]";
  JsonWriter json;
  json.AddString("kind", spec.kind == FeatureSpec::Kind::kFixedLen ? "FixedLen" : "VarLen");
  if (spec.kind == FeatureSpec::Kind::kFixedLen) json.AddRaw("shape", shape);
  return json.AddString("dtype", example::DTypeName(spec.dtype))
      .AddString("python", SpecToPython(spec))
      .str();
}

std::string JsonKey(const Schema& schema, const KeyStats& key) {
  std::string types = "[";
  for (example::ListKind kind : key.kinds()) {
    if (types.size() > 1) types += ",";
    types += JsonQuote(example::ListKindName(kind));
  }
  types += "]";
  JsonWriter json;
  json.AddString("key", key.key)
      .AddRaw("types", types)
      .AddBool("conflicting", key.conflicting())
      .AddUint("records_present", key.records_present())
      .AddRaw("presence", JsonNumber(schema.presence(key)))
      .AddUint("records_empty_feature", key.records_empty_feature)
      .AddRaw("values", JsonWriter()
                            .AddUint("min", key.min_values)
                            .AddRaw("mean", JsonNumber(key.mean_values()))
                            .AddUint("max", key.max_values)
                            .AddUint("total", key.total_values)
                            .str());
  if (key.records_by_kind[static_cast<size_t>(example::ListKind::kBytes)] > 0) {
    json.AddRaw("value_bytes", JsonWriter()
                                   .AddUint("min", key.min_value_bytes)
                                   .AddRaw("mean", JsonNumber(key.mean_value_bytes()))
                                   .AddUint("max", key.max_value_bytes)
                                   .AddUint("total", key.total_value_bytes)
                                   .str());
  }
  std::optional<FeatureSpec> spec = schema.ProposeSpec(key);
  json.AddRaw("spec", spec ? JsonSpec(*spec) : "null");
  return json.str();
}

std::string JsonReport(const std::vector<FileScan>& scans, const Schema& schema,
                       const std::optional<MalformedOrigin>& origin, bool limit_reached) {
  std::string files;
  for (const FileScan& scan : scans) {
    JsonWriter json;
    json.AddString("path", scan.path).AddString("compression", scan.compression);
    json.AddRaw("file_bytes", scan.file_bytes ? std::to_string(*scan.file_bytes) : "null");
    json.AddUint("records", scan.records);
    if (!scan.error.ok()) {
      json.AddString("status", "error").AddRaw("error", JsonStatus(scan.error));
    } else {
      json.AddString("status", scan.read ? "ok" : "not_read");
    }
    if (!files.empty()) files += ",";
    files += json.str();
  }
  std::string first_malformed = "null";
  if (origin) {
    first_malformed = JsonWriter()
                          .AddString("path", origin->path)
                          .AddUint("record_index", origin->record_in_file)
                          .AddRaw("error", JsonStatus(schema.first_malformed_error))
                          .str();
  }
  std::string features;
  for (const KeyStats& key : schema.keys) {
    if (!features.empty()) features += ",";
    features += JsonKey(schema, key);
  }
  return JsonWriter()
             .AddRaw("files", "[" + files + "]")
             .AddUint("records", schema.records)
             .AddBool("limit_reached", limit_reached)
             .AddRaw("record_bytes", JsonWriter()
                                         .AddUint("min", schema.min_record_bytes)
                                         .AddRaw("mean", JsonNumber(schema.mean_record_bytes()))
                                         .AddUint("max", schema.max_record_bytes)
                                         .AddUint("total", schema.total_record_bytes)
                                         .str())
             .AddUint("examples", schema.examples)
             .AddUint("empty_examples", schema.empty_examples)
             .AddUint("malformed_records", schema.malformed_records)
             .AddRaw("first_malformed", first_malformed)
             .AddUint("untracked_features", schema.untracked_features)
             .AddRaw("features", "[" + features + "]")
             .str() +
         "\n";
}

int RunInspect(const InspectOptions& options) {
  example::SchemaOptions schema_options;
  example::SchemaInference inference(schema_options);
  uint64_t budget = options.limit;
  std::optional<MalformedOrigin> origin;
  std::vector<FileScan> scans;
  int exit_code = kExitOk;
  for (const std::string& path : options.files) {
    FileScan& scan = scans.emplace_back();
    scan.path = path;
    scan.compression = CompressionLabel(path, options.compression);
    const uint64_t first_record = inference.records();
    const bool had_malformed = inference.malformed_records() > 0;
    ScanFile(options, inference, &budget, scan);
    if (!had_malformed && inference.malformed_records() > 0) {
      origin = MalformedOrigin{path, inference.schema().first_malformed_record - first_record};
    }
    if (!scan.error.ok()) exit_code = PrintAndFold(exit_code, scan.error);
  }
  const Schema schema = inference.schema();
  // The scan stopped at --limit records; whether more followed is not known, because finding
  // out would read (and check) a record the user asked not to read.
  const bool limit_reached = budget == 0 && options.limit != std::numeric_limits<uint64_t>::max();
  const std::string report = options.json
                                 ? JsonReport(scans, schema, origin, limit_reached)
                                 : TextReport(scans, schema, origin, schema_options.max_keys);
  if (WriteOutOrFail(report) != kExitOk) return kExitError;
  return exit_code;
}

}  // namespace

Command AddInspectCommand(CLI::App& app) {
  auto options = std::make_shared<InspectOptions>();
  CLI::App* command = app.add_subcommand(
      "inspect",
      "Describe the tf.train.Example records of the files: keys, types, presence, value "
      "counts, sizes, and a proposed parsing spec");
  AddRequiredArgument(*command, "files", &options->files, "TFRecord files (read as one dataset)",
                      "FILE");
  command->add_option("--limit", options->limit, "Scan at most N records in all (default: all)")
      ->type_name("N")
      ->check(UnsignedIn(0));
  command->add_flag("--json", options->json, "Print one JSON document instead of text");
  AddCompressionOption(*command, &options->compression);
  AddCacheOptions(*command);
  return {command,
          AfterExpandingFiles(&options->files, [options] { return RunInspect(*options); })};
}

}  // namespace recordflow::cli
