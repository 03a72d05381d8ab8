// A small JSON reader and writer for the convert layer's own files (plan, shard state,
// summary) and for JSONL manifests. Not a general-purpose library: numbers keep their text,
// objects keep their member order, nesting is limited to 64 levels.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "recordflow/core/status.h"

namespace recordflow::convert::internal {

struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  std::string text;  // the string's value, or the number's literal text
  std::vector<JsonValue> items;
  // An object's members, in order: names and values side by side (a vector of pairs would need
  // JsonValue complete here).
  std::vector<std::string> member_names;
  std::vector<JsonValue> member_values;

  // The member named `key`, or nullptr.
  const JsonValue* Find(std::string_view key) const;
  bool is_integer() const;  // a number without fraction or exponent
  int64_t AsInt() const;    // 0 when not an integer
  double AsDouble() const;
};

// Errors: kInvalidArgument naming the byte offset of the problem.
Result<JsonValue> ParseJson(std::string_view text);

// A JSON string literal with quotes; invalid UTF-8 bytes become U+FFFD.
std::string JsonQuote(std::string_view text);

// Builds a JSON object member by member (insertion order).
class JsonWriter {
 public:
  JsonWriter& String(std::string_view key, std::string_view value);
  JsonWriter& Int(std::string_view key, int64_t value);
  JsonWriter& Uint(std::string_view key, uint64_t value);
  JsonWriter& Double(std::string_view key, double value);
  JsonWriter& Bool(std::string_view key, bool value);
  JsonWriter& Raw(std::string_view key, std::string_view json);
  std::string str() const { return body_ + "}"; }

 private:
  void Key(std::string_view key);
  std::string body_ = "{";
};

// "[a,b,c]" from already-encoded JSON values.
std::string JsonArray(const std::vector<std::string>& items);

// One shard's entry in convert's summary.json and in reshard's summary: Python's cardinality
// (recordflow/_cardinality.py) reads "file", "records" and "bytes" back from it.
std::string ShardJson(std::string_view file, uint64_t records, uint64_t bytes, bool resumed);

}  // namespace recordflow::convert::internal
