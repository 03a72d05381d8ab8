// CSV and JSON Lines manifests -> InputListing.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>

#include "json_internal.h"
#include "recordflow/convert/plan.h"
#include "recordflow/io/file.h"

namespace recordflow::convert {
namespace {

using internal::JsonValue;

// One cell of a manifest row, typed as far as the source format says.
struct Cell {
  enum class Kind { kMissing, kString, kInt, kFloat, kList } kind = Kind::kMissing;
  std::string text;
  std::vector<Cell> list;
};

struct Row {
  uint64_t line = 0;
  std::map<std::string, Cell> cells;
};

bool EndsWith(std::string_view s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  for (size_t i = 0; i < suffix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[s.size() - suffix.size() + i])) != suffix[i]) {
      return false;
    }
  }
  return true;
}

bool ParsesAsInt(const std::string& s) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  std::strtoll(s.c_str(), &end, 10);
  return errno == 0 && end == s.c_str() + s.size();
}

bool ParsesAsFloat(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

// RFC 4180: fields separated by commas, optionally quoted with "" as an escaped quote; quoted
// fields may hold newlines. Returns rows of fields with the line each row starts on.
Result<std::vector<std::pair<uint64_t, std::vector<std::string>>>> ParseCsv(std::string_view text,
                                                                           const std::string& path) {
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
  if (quoted) return InvalidArgumentError(path + ":" + std::to_string(row_line) +
                                          ": unterminated quoted field");
  if (!field.empty() || !fields.empty()) end_row();
  return rows;
}

Cell CellFromJson(const JsonValue& v) {
  Cell cell;
  switch (v.type) {
    case JsonValue::Type::kString: cell.kind = Cell::Kind::kString; cell.text = v.text; break;
    case JsonValue::Type::kNumber:
      cell.kind = v.is_integer() ? Cell::Kind::kInt : Cell::Kind::kFloat;
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
    default: break;  // null, nested objects: missing
  }
  return cell;
}

Cell CellFromCsv(const std::string& text) {
  Cell cell;
  if (text.empty()) return cell;
  cell.text = text;
  cell.kind = ParsesAsInt(text) ? Cell::Kind::kInt
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

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return "";
  return path.substr(0, slash + 1);
}

}  // namespace

Result<InputListing> ReadManifest(const std::string& path, const ConvertOptions& options) {
  RF_ASSIGN_OR_RETURN(std::string text, io::ReadFileToString(path));
  const bool jsonl = EndsWith(path, ".jsonl") || EndsWith(path, ".ndjson") || EndsWith(path, ".json");
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
        row.cells[key] = CellFromJson(value->member_values[m]);
        if (seen_columns.insert(key).second) columns.push_back(key);
      }
      rows.push_back(std::move(row));
    }
  } else {
    RF_ASSIGN_OR_RETURN(auto csv, ParseCsv(text, path));
    if (csv.empty()) return InvalidArgumentError("manifest '" + path + "' is empty");
    columns = csv[0].second;
    for (size_t r = 1; r < csv.size(); ++r) {
      Row row;
      row.line = csv[r].first;
      for (size_t c = 0; c < columns.size() && c < csv[r].second.size(); ++c) {
        Cell cell = CellFromCsv(csv[r].second[c]);
        row.cells[columns[c]] = std::move(cell);
      }
      rows.push_back(std::move(row));
    }
  }
  auto pick = [&](const std::string& given, std::initializer_list<const char*> defaults)
      -> std::optional<std::string> {
    if (!given.empty()) {
      if (std::find(columns.begin(), columns.end(), given) == columns.end()) return std::nullopt;
      return given;
    }
    for (const char* name : defaults) {
      if (std::find(columns.begin(), columns.end(), name) != columns.end()) return name;
    }
    return std::nullopt;
  };
  const auto image_column = pick(options.image_column, {"image", "path", "filename", "file",
                                                        "image_path"});
  if (!image_column) {
    return InvalidArgumentError(
        "manifest '" + path + "' has no image column " +
        (options.image_column.empty() ? std::string("(looked for image, path, filename, file, "
                                                    "image_path; set image_column)")
                                      : "'" + options.image_column + "'"));
  }
  const auto label_column = pick(options.label_column, {"label", "labels", "class"});
  if (!options.label_column.empty() && !label_column) {
    return InvalidArgumentError("manifest '" + path + "' has no label column '" +
                                options.label_column + "'");
  }

  InputListing listing;
  // Labels: split CSV values by the separator, then decide integer or named.
  std::vector<std::vector<std::string>> row_labels(rows.size());
  bool all_int = true;
  bool any_label = false;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (!label_column) break;
    auto it = rows[r].cells.find(*label_column);
    if (it == rows[r].cells.end()) continue;
    for (const Cell* c : Scalars(it->second)) {
      if (!jsonl && !options.label_separator.empty()) {
        size_t start = 0;
        while (start <= c->text.size()) {
          size_t end = c->text.find(options.label_separator, start);
          if (end == std::string::npos) end = c->text.size();
          std::string part = c->text.substr(start, end - start);
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
    extra_kind[col] = ints ? example::ListKind::kInt64
                           : numbers ? example::ListKind::kFloat : example::ListKind::kBytes;
  }

  const std::string base = DirName(path);
  for (size_t r = 0; r < rows.size(); ++r) {
    const Row& row = rows[r];
    auto image = row.cells.find(*image_column);
    if (image == row.cells.end() || image->second.kind == Cell::Kind::kMissing ||
        image->second.kind == Cell::Kind::kList || image->second.text.empty()) {
      listing.skipped.push_back({path + ":" + std::to_string(row.line),
                                 "manifest row without an image path"});
      continue;
    }
    InputItem item;
    item.filename = image->second.text;
    item.path = !item.filename.empty() && item.filename[0] == '/' ? item.filename
                                                                  : base + item.filename;
    struct stat st;
    if (::stat(item.path.c_str(), &st) == 0) item.size = static_cast<uint64_t>(st.st_size);
    for (const std::string& label : row_labels[r]) {
      item.labels.push_back(listing.named_classes ? class_index[label]
                                                  : std::strtoll(label.c_str(), nullptr, 10));
    }
    for (const auto& [col, kind] : extra_kind) {
      auto it = row.cells.find(col);
      if (it == row.cells.end()) continue;
      std::vector<const Cell*> values = Scalars(it->second);
      if (values.empty()) continue;
      example::Feature f;
      f.kind = kind;
      for (const Cell* c : values) {
        if (kind == example::ListKind::kInt64) f.int64s.push_back(std::strtoll(c->text.c_str(), nullptr, 10));
        if (kind == example::ListKind::kFloat) f.floats.push_back(std::strtof(c->text.c_str(), nullptr));
        if (kind == example::ListKind::kBytes) f.bytes.push_back(c->text);
      }
      item.extra[col] = std::move(f);
    }
    listing.items.push_back(std::move(item));
  }
  return listing;
}

}  // namespace recordflow::convert
