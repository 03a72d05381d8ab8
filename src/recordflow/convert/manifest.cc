// CSV and JSON Lines manifests -> InputListing.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>

#include "convert_internal.h"
#include "json_internal.h"
#include "recordflow/convert/plan.h"
#include "recordflow/io/file.h"
#include "recordflow/io/filesystem.h"

namespace recordflow::convert {
namespace {

using internal::JsonValue;

// One cell of a manifest row, typed as far as the source format says.
struct Cell {
  // kObject (a JSON object) and kBigInt (an integer outside int64) are never used: a row
  // holding one is an error naming the field.
  enum class Kind {
    kMissing,
    kString,
    kInt,
    kFloat,
    kList,
    kObject,
    kBigInt
  } kind = Kind::kMissing;
  std::string text;
  std::vector<Cell> list;
};

struct Row {
  uint64_t line = 0;
  std::map<std::string, Cell> cells;
};

bool ParsesAsInt(const std::string& s) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  std::strtoll(s.c_str(), &end, 10);
  return errno == 0 && end == s.c_str() + s.size();
}

// Digits with an optional sign: an integer, whatever its size.
bool LooksLikeInt(const std::string& s) {
  size_t i = s.size() > 1 && (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (i == s.size()) return false;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

bool ParsesAsFloat(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

// RFC 4180: fields separated by commas, optionally quoted with "" as an escaped quote; quoted
// fields may hold newlines. Returns rows of fields with the line each row starts on.
Result<std::vector<std::pair<uint64_t, std::vector<std::string>>>> ParseCsv(
    std::string_view text, const std::string& path) {
  std::vector<std::pair<uint64_t, std::vector<std::string>>> rows;
  std::vector<std::string> fields;
  std::string field;
  bool quoted = false, field_started = false;
  uint64_t line = 1, row_line = 1;
  size_t i = 0;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") i = 3;  // UTF-8 BOM
  auto end_row = [&] {
    fields.push_back(std::move(field));
    field.clear();
    if (!(fields.size() == 1 && fields[0].empty())) rows.emplace_back(row_line, std::move(fields));
    fields.clear();
    field_started = false;
  };
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field.push_back('"');
          ++i;
        } else {
          quoted = false;
        }
      } else {
        if (c == '\n') ++line;
        field.push_back(c);
      }
      continue;
    }
    if (c == '"' && !field_started) {
      quoted = field_started = true;
    } else if (c == ',') {
      fields.push_back(std::move(field));
      field.clear();
      field_started = false;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      end_row();
      row_line = ++line;
    } else {
      field.push_back(c);
      field_started = true;
    }
  }
  if (quoted)
    return InvalidArgumentError(path + ":" + std::to_string(row_line) +
                                ": unterminated quoted field");
  if (!field.empty() || !fields.empty()) end_row();
  return rows;
}

Cell CellFromJson(const JsonValue& v) {
  Cell cell;
  switch (v.type) {
    case JsonValue::Type::kString:
      cell.kind = Cell::Kind::kString;
      cell.text = v.text;
      break;
    case JsonValue::Type::kNumber:
      cell.kind = !v.is_integer()       ? Cell::Kind::kFloat
                  : ParsesAsInt(v.text) ? Cell::Kind::kInt
                                        : Cell::Kind::kBigInt;
      cell.text = v.text;
      break;
    case JsonValue::Type::kBool:
      cell.kind = Cell::Kind::kInt;
      cell.text.assign(1, v.boolean ? '1' : '0');
      break;
    case JsonValue::Type::kArray:
      cell.kind = Cell::Kind::kList;
      for (const auto& item : v.items) cell.list.push_back(CellFromJson(item));
      break;
    case JsonValue::Type::kObject:
      cell.kind = Cell::Kind::kObject;
      break;
    default:
      break;  // null: missing
  }
  return cell;
}

Cell CellFromCsv(const std::string& text) {
  Cell cell;
  if (text.empty()) return cell;
  cell.text = text;
  cell.kind = ParsesAsInt(text)     ? Cell::Kind::kInt
              : LooksLikeInt(text)  ? Cell::Kind::kBigInt
              : ParsesAsFloat(text) ? Cell::Kind::kFloat
                                    : Cell::Kind::kString;
  return cell;
}

// The scalar cells of a cell (itself, or a list's items).
std::vector<const Cell*> Scalars(const Cell& cell) {
  std::vector<const Cell*> out;
  if (cell.kind == Cell::Kind::kList) {
    for (const Cell& c : cell.list) {
      if (c.kind != Cell::Kind::kMissing && c.kind != Cell::Kind::kList) out.push_back(&c);
    }
  } else if (cell.kind != Cell::Kind::kMissing) {
    out.push_back(&cell);
  }
  return out;
}

std::string Where(const std::string& path, uint64_t line, const std::string& field) {
  return "manifest '" + path + "' line " + std::to_string(line) + ", field '" + field + "'";
}

// Rejects values no record can hold faithfully: JSON objects, lists of lists, integers
// outside int64.
Status CheckCell(const Cell& cell, const std::string& path, uint64_t line, const std::string& field,
                 bool nested = false) {
  switch (cell.kind) {
    case Cell::Kind::kObject:
      return InvalidArgumentError(Where(path, line, field) +
                                  ": a JSON object (expected a string, a number or a list)");
    case Cell::Kind::kBigInt:
      return InvalidArgumentError(Where(path, line, field) + ": integer " + cell.text +
                                  " is outside the int64 range");
    case Cell::Kind::kList:
      if (nested) return InvalidArgumentError(Where(path, line, field) + ": a list inside a list");
      for (const Cell& c : cell.list) RF_RETURN_IF_ERROR(CheckCell(c, path, line, field, true));
      return Status::OK();
    default:
      return Status::OK();
  }
}

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return "";
  return path.substr(0, slash + 1);
}

}  // namespace

Result<InputListing> ReadManifest(const std::string& path, const ConvertOptions& options) {
  RF_ASSIGN_OR_RETURN(std::string text, io::ReadFileToString(path));
  const bool jsonl = internal::EndsWithCaseless(path, ".jsonl") ||
                     internal::EndsWithCaseless(path, ".ndjson") ||
                     internal::EndsWithCaseless(path, ".json");
  std::vector<Row> rows;
  std::vector<std::string> columns;  // in first-seen order
  std::set<std::string> seen_columns;
  if (jsonl) {
    uint64_t line = 0;
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      std::string_view body(text.data() + start, end - start);
      ++line;
      start = end + 1;
      if (body.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      Result<JsonValue> value = internal::ParseJson(body);
      if (!value.ok()) return value.status().WithContext(path + ":" + std::to_string(line));
      if (value->type != JsonValue::Type::kObject) {
        return InvalidArgumentError(path + ":" + std::to_string(line) + ": not a JSON object");
      }
      Row row;
      row.line = line;
      for (size_t m = 0; m < value->member_names.size(); ++m) {
        const std::string& key = value->member_names[m];
        if (row.cells.count(key) != 0) {
          return InvalidArgumentError(Where(path, line, key) +
                                      ": the key appears twice in the row");
        }
        row.cells[key] = CellFromJson(value->member_values[m]);
        if (seen_columns.insert(key).second) columns.push_back(key);
      }
      rows.push_back(std::move(row));
    }
  } else {
    RF_ASSIGN_OR_RETURN(auto csv, ParseCsv(text, path));
    if (csv.empty()) return InvalidArgumentError("manifest '" + path + "' is empty");
    columns = csv[0].second;
    for (size_t c = 0; c < columns.size(); ++c) {
      if (!seen_columns.insert(columns[c]).second) {
        return InvalidArgumentError("manifest '" + path + "' line " + std::to_string(csv[0].first) +
                                    ": duplicate column '" + columns[c] + "' (columns " +
                                    std::to_string(c + 1) + " and earlier)");
      }
    }
    for (size_t r = 1; r < csv.size(); ++r) {
      Row row;
      row.line = csv[r].first;
      if (csv[r].second.size() != columns.size()) {
        return InvalidArgumentError("manifest '" + path + "' line " + std::to_string(row.line) +
                                    " (row " + std::to_string(r) +
                                    "): " + std::to_string(csv[r].second.size()) +
                                    " fields, the header has " + std::to_string(columns.size()));
      }
      for (size_t c = 0; c < columns.size(); ++c) {
        Cell cell = CellFromCsv(csv[r].second[c]);
        row.cells[columns[c]] = std::move(cell);
      }
      rows.push_back(std::move(row));
    }
  }
  auto pick = [&](const std::string& given,
                  std::initializer_list<const char*> defaults) -> std::optional<std::string> {
    if (!given.empty()) {
      if (std::find(columns.begin(), columns.end(), given) == columns.end()) return std::nullopt;
      return given;
    }
    for (const char* name : defaults) {
      if (std::find(columns.begin(), columns.end(), name) != columns.end()) return name;
    }
    return std::nullopt;
  };
  const auto image_column =
      pick(options.image_column, {"image", "path", "filename", "file", "image_path"});
  if (!image_column) {
    return InvalidArgumentError("manifest '" + path + "' has no image column " +
                                (options.image_column.empty()
                                     ? std::string("(looked for image, path, filename, file, "
                                                   "image_path; set image_column)")
                                     : "'" + options.image_column + "'"));
  }
  const auto label_column = pick(options.label_column, {"label", "labels", "class"});
  if (!options.label_column.empty() && !label_column) {
    return InvalidArgumentError("manifest '" + path + "' has no label column '" +
                                options.label_column + "'");
  }

  for (const Row& row : rows) {
    for (const auto& [col, cell] : row.cells)
      RF_RETURN_IF_ERROR(CheckCell(cell, path, row.line, col));
  }

  InputListing listing;
  // Labels: split CSV values by the separator, then decide integer or named. In a manifest with
  // a label column every row needs a label: an empty one is an error, not an unlabeled record.
  std::vector<std::vector<std::string>> row_labels(rows.size());
  bool all_int = true;
  bool any_label = false;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (!label_column) break;
    auto it = rows[r].cells.find(*label_column);
    const std::string where = Where(path, rows[r].line, *label_column);
    if (it == rows[r].cells.end() || Scalars(it->second).empty()) {
      return InvalidArgumentError(where +
                                  ": no label (every row needs one when the manifest "
                                  "has a label column)");
    }
    for (const Cell* c : Scalars(it->second)) {
      if (c->text.empty()) return InvalidArgumentError(where + ": empty label");
      if (c->text.find('\0') != std::string::npos ||
          c->text.find_first_of("\r\n") != std::string::npos) {
        return InvalidArgumentError(where + ": label holds a NUL byte or a line break");
      }
      if (!jsonl && !options.label_separator.empty()) {
        size_t start = 0;
        while (start <= c->text.size()) {
          size_t end = c->text.find(options.label_separator, start);
          if (end == std::string::npos) end = c->text.size();
          std::string part = c->text.substr(start, end - start);
          if (LooksLikeInt(part) && !ParsesAsInt(part)) {
            return InvalidArgumentError(where + ": integer " + part +
                                        " is outside the int64 range");
          }
          if (!part.empty()) {
            all_int &= ParsesAsInt(part);
            row_labels[r].push_back(std::move(part));
          }
          start = end + options.label_separator.size();
        }
      } else {
        all_int &= c->kind == Cell::Kind::kInt;
        row_labels[r].push_back(c->text);
      }
    }
    if (row_labels[r].empty()) return InvalidArgumentError(where + ": empty label");
    any_label |= !row_labels[r].empty();
  }
  listing.named_classes = any_label && !all_int;
  std::map<std::string, int64_t> class_index;
  if (listing.named_classes) {
    std::set<std::string> names;
    for (const auto& labels : row_labels) names.insert(labels.begin(), labels.end());
    for (const auto& name : names) {
      class_index[name] = static_cast<int64_t>(listing.class_names.size());
      listing.class_names.push_back(name);
    }
  }

  // Extra columns: a type per column (int64 if every value is an integer, float32 if every
  // value is a number, else bytes).
  std::map<std::string, example::ListKind> extra_kind;
  for (const std::string& col : columns) {
    if (col == *image_column || (label_column && col == *label_column)) continue;
    bool ints = true, numbers = true, any = false;
    for (const Row& row : rows) {
      auto it = row.cells.find(col);
      if (it == row.cells.end()) continue;
      for (const Cell* c : Scalars(it->second)) {
        any = true;
        ints &= c->kind == Cell::Kind::kInt;
        numbers &= c->kind == Cell::Kind::kInt || c->kind == Cell::Kind::kFloat;
      }
    }
    if (!any) continue;
    extra_kind[col] = ints      ? example::ListKind::kInt64
                      : numbers ? example::ListKind::kFloat
                                : example::ListKind::kBytes;
  }

  const std::string base = DirName(path);
  for (size_t r = 0; r < rows.size(); ++r) {
    const Row& row = rows[r];
    auto image = row.cells.find(*image_column);
    if (image == row.cells.end() || image->second.kind == Cell::Kind::kMissing ||
        image->second.kind == Cell::Kind::kList || image->second.text.empty()) {
      listing.skipped.push_back(
          {path + ":" + std::to_string(row.line), "manifest row without an image path"});
      continue;
    }
    if (image->second.text.find('\0') != std::string::npos) {
      return InvalidArgumentError(Where(path, row.line, *image_column) +
                                  ": the path holds a NUL byte");
    }
    InputItem item;
    item.filename = image->second.text;
    // Absolute: a local path or a URL; relative ones resolve against the manifest's folder
    // (or key prefix, for a manifest in a bucket).
    const bool absolute = item.filename[0] == '/' || io::IsRemotePath(item.filename);
    item.path = absolute ? item.filename : base + item.filename;
    struct stat st;
    if (!io::IsRemotePath(item.path) && ::stat(item.path.c_str(), &st) == 0) {
      item.size = static_cast<uint64_t>(st.st_size);
    }
    for (const std::string& label : row_labels[r]) {
      const int64_t value =
          listing.named_classes ? class_index[label] : std::strtoll(label.c_str(), nullptr, 10);
      if (options.label_offset > 0 ? value > INT64_MAX - options.label_offset
                                   : value < INT64_MIN - options.label_offset) {
        return InvalidArgumentError(
            Where(path, row.line, *label_column) + ": label " + label + " plus the label offset " +
            std::to_string(options.label_offset) + " is outside the int64 range");
      }
      item.labels.push_back(value);
    }
    for (const auto& [col, kind] : extra_kind) {
      auto it = row.cells.find(col);
      if (it == row.cells.end()) continue;
      std::vector<const Cell*> values = Scalars(it->second);
      if (values.empty()) continue;
      example::Feature f;
      f.kind = kind;
      for (const Cell* c : values) {
        if (kind == example::ListKind::kInt64)
          f.int64s.push_back(std::strtoll(c->text.c_str(), nullptr, 10));
        if (kind == example::ListKind::kFloat)
          f.floats.push_back(std::strtof(c->text.c_str(), nullptr));
        if (kind == example::ListKind::kBytes) f.bytes.push_back(c->text);
      }
      item.extra[col] = std::move(f);
    }
    listing.items.push_back(std::move(item));
  }
  FillRemoteSizes(&listing);
  return listing;
}

}  // namespace recordflow::convert
