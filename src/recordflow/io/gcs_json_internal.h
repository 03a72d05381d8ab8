// A small JSON reader for the answers of GCS's JSON API, the OAuth2 token endpoints and
// service-account key files (io cannot use convert's reader: layering).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "recordflow/core/status.h"

namespace recordflow::io::internal {

struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  std::string text;  // a string's decoded value, or a number's literal text
  bool boolean = false;
  std::vector<JsonValue> items;  // kArray
  // kObject, in document order. Parallel vectors: std::pair cannot hold the incomplete type.
  std::vector<std::string> member_names;
  std::vector<JsonValue> member_values;

  // The member `key` of an object, or nullptr.
  const JsonValue* Get(std::string_view key) const;
  // The member `key` as text (a string's value or a number's literal); empty when absent.
  std::string GetText(std::string_view key) const;
};

// Parses one JSON document (nesting depth at most 64). Errors: kInvalidArgument naming the byte
// offset and `what` (the document's origin, e.g. a file name).
Result<JsonValue> ParseJson(std::string_view text, std::string_view what);

}  // namespace recordflow::io::internal
