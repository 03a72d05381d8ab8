// A small JSON reader for the convert layer's own files (plan, shard state, summary) and for
// JSONL manifests; recordflow/core/json.h writes them. Not a general-purpose library: numbers
// keep their text, objects keep their member order, nesting is limited to 64 levels.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "recordflow/core/json.h"
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

// One shard's entry in convert's summary.json and in reshard's summary: Python's cardinality
// (recordflow/_cardinality.py) reads "file", "records" and "bytes" back from it.
std::string ShardJson(std::string_view file, uint64_t records, uint64_t bytes, bool resumed);

}  // namespace recordflow::convert::internal
