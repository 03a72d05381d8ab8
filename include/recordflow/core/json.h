// The one JSON writer of recordflow: string quoting and an object builder, used by the CLI's
// --json output and by the convert layer's own files (plan, shard state, summary).
//
// Thread safety: JsonQuote and JsonArray are thread-safe; a JsonWriter is thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "recordflow/core/status.h"

namespace recordflow {

// A JSON string literal (with the quotes). Bytes that are not well-formed UTF-8 (see utf8.h)
// become "\ufffd", so the output is valid JSON whatever a path or message contains; control
// characters are escaped.
std::string JsonQuote(std::string_view text);

// How members are separated: kCompact is {"a":1,"b":2} (the CLI's lines); kSpaced is
// {"a": 1, "b": 2}, the layout of Python's json.dumps, which convert's files share with the
// files Python writes.
enum class JsonLayout { kCompact, kSpaced };

// Builds one JSON object, member by member, in insertion order. Distinct method names rather
// than overloads, because a string literal would otherwise silently pick the bool overload.
class JsonWriter {
 public:
  explicit JsonWriter(JsonLayout layout = JsonLayout::kCompact) : layout_(layout) {}

  JsonWriter& AddString(std::string_view key, std::string_view value);
  JsonWriter& AddInt(std::string_view key, int64_t value);
  JsonWriter& AddUint(std::string_view key, uint64_t value);
  // Six significant digits ("%.6g"); NaN and infinities are null.
  JsonWriter& AddDouble(std::string_view key, double value);
  JsonWriter& AddBool(std::string_view key, bool value);
  // `json` must already be valid JSON (an object, an array, null, ...).
  JsonWriter& AddRaw(std::string_view key, std::string_view json);
  // The object, "{...}".
  std::string str() const { return body_ + "}"; }

 private:
  void AddKey(std::string_view key);
  JsonLayout layout_;
  std::string body_ = "{";
};

// "[a,b,c]" (kSpaced: "[a, b, c]") from already-encoded JSON values.
std::string JsonArray(const std::vector<std::string>& items,
                      JsonLayout layout = JsonLayout::kCompact);

// ---- reading --------------------------------------------------------------------------------

// One parsed JSON value: recordflow's one JSON reader (convert's plan, state and summary files and
// JSONL manifests; GCS answers, token endpoints and key files). Numbers keep their literal text,
// objects their member order.
struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  std::string text;  // a string's decoded value, or a number's literal text
  std::vector<JsonValue> items;
  // An object's members, in order: names and values side by side (a vector of pairs would need
  // JsonValue complete here).
  std::vector<std::string> member_names;
  std::vector<JsonValue> member_values;

  // The first member named `key`, or nullptr.
  const JsonValue* Find(std::string_view key) const;
  // The member `key` as text (a string's value or a number's literal); empty when absent.
  std::string FindText(std::string_view key) const;
  bool is_integer() const;  // a number without fraction or exponent
  int64_t AsInt() const;    // 0 when not an integer
  double AsDouble() const;
};

// Parses one JSON document (nesting at most 64 levels). Errors: kInvalidArgument "invalid JSON
// [in <what>] at byte offset N: <why>", `what` naming where the text came from (a file, a URL).
Result<JsonValue> ParseJson(std::string_view text, std::string_view what = {});

}  // namespace recordflow
