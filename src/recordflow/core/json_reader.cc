// The JSON reader (core/json.h).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "recordflow/core/json.h"

namespace recordflow {
namespace {

class Parser {
 public:
  Parser(std::string_view text, std::string_view what) : s_(text), what_(what) {}

  Result<JsonValue> ParseDocument() {
    JsonValue v;
    RF_RETURN_IF_ERROR(ParseValue(&v, 0));
    SkipSpace();
    if (pos_ != s_.size()) return Error("trailing characters");
    return v;
  }

 private:
  Status Error(std::string_view what) const {
    return InvalidArgumentError(
        "invalid JSON" + (what_.empty() ? std::string() : " in " + std::string(what_)) +
        " at byte offset " + std::to_string(pos_) + ": " + std::string(what));
  }
  void SkipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Consume(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  Result<uint32_t> Hex4() {
    if (pos_ + 4 > s_.size()) return Error("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= c - '0';
      else if (c >= 'a' && c <= 'f')
        v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        v |= c - 'A' + 10;
      else
        return Error("bad \\u escape");
    }
    return v;
  }
  Status ParseString(std::string* out) {
    ++pos_;  // opening quote
    while (true) {
      if (pos_ >= s_.size()) return Error("unterminated string");
      char c = s_[pos_++];
      if (c == '"') return Status::OK();
      if (static_cast<unsigned char>(c) < 0x20) return Error("control character in string");
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) return Error("unterminated escape");
      char e = s_[pos_++];
      if (e == 'u') {
        RF_ASSIGN_OR_RETURN(uint32_t cp, Hex4());
        if (cp >= 0xD800 && cp < 0xDC00 && Consume("\\u")) {
          RF_ASSIGN_OR_RETURN(uint32_t lo, Hex4());
          if (lo >= 0xDC00 && lo < 0xE000) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        AppendUtf8(cp, out);
        continue;
      }
      // JSON's one-character escapes: \X stands for kEscaped[i] where X is kEscapes[i].
      static constexpr std::string_view kEscapes = "\"\\/bfnrt";
      static constexpr std::string_view kEscaped = "\"\\/\b\f\n\r\t";
      const size_t i = kEscapes.find(e);
      if (i == std::string_view::npos) return Error("bad escape");
      out->push_back(kEscaped[i]);
    }
  }
  // An object's or array's elements after its opening bracket: parse_one() for each, ',' between
  // them and `close` after the last (or at once, when there are none).
  template <typename Fn>
  Status ParseElements(std::string_view close, std::string_view expected, Fn&& parse_one) {
    SkipSpace();
    if (Consume(close)) return Status::OK();
    while (true) {
      RF_RETURN_IF_ERROR(parse_one());
      SkipSpace();
      if (Consume(close)) return Status::OK();
      if (!Consume(",")) return Error(expected);
    }
  }
  Status ParseValue(JsonValue* v, int depth) {
    if (depth > 64) return Error("nested too deeply");
    SkipSpace();
    if (pos_ >= s_.size()) return Error("unexpected end");
    char c = s_[pos_];
    if (c == '{') {
      v->type = JsonValue::Type::kObject;
      ++pos_;
      return ParseElements("}", "expected ',' or '}'", [&]() -> Status {
        SkipSpace();
        if (pos_ >= s_.size() || s_[pos_] != '"') return Error("expected a member name");
        std::string key;
        RF_RETURN_IF_ERROR(ParseString(&key));
        SkipSpace();
        if (!Consume(":")) return Error("expected ':'");
        JsonValue member;
        RF_RETURN_IF_ERROR(ParseValue(&member, depth + 1));
        v->member_names.push_back(std::move(key));
        v->member_values.push_back(std::move(member));
        return Status::OK();
      });
    }
    if (c == '[') {
      v->type = JsonValue::Type::kArray;
      ++pos_;
      return ParseElements("]", "expected ',' or ']'", [&]() -> Status {
        JsonValue item;
        RF_RETURN_IF_ERROR(ParseValue(&item, depth + 1));
        v->items.push_back(std::move(item));
        return Status::OK();
      });
    }
    if (c == '"') {
      v->type = JsonValue::Type::kString;
      return ParseString(&v->text);
    }
    if (Consume("true")) {
      v->type = JsonValue::Type::kBool;
      v->boolean = true;
      return Status::OK();
    }
    if (Consume("false")) {
      v->type = JsonValue::Type::kBool;
      return Status::OK();
    }
    if (Consume("null")) return Status::OK();
    size_t start = pos_;
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    bool digits = false;
    while (pos_ < s_.size() &&
           ((s_[pos_] >= '0' && s_[pos_] <= '9') || s_[pos_] == '.' || s_[pos_] == 'e' ||
            s_[pos_] == 'E' || s_[pos_] == '+' || s_[pos_] == '-')) {
      digits |= s_[pos_] >= '0' && s_[pos_] <= '9';
      ++pos_;
    }
    if (!digits) return Error("unexpected character");
    v->type = JsonValue::Type::kNumber;
    v->text = std::string(s_.substr(start, pos_ - start));
    return Status::OK();
  }

  std::string_view s_;
  std::string_view what_;
  size_t pos_ = 0;
};

}  // namespace

const JsonValue* JsonValue::Find(std::string_view key) const {
  for (size_t i = 0; i < member_names.size(); ++i) {
    if (member_names[i] == key) return &member_values[i];
  }
  return nullptr;
}

std::string JsonValue::FindText(std::string_view key) const {
  const JsonValue* v = Find(key);
  return v != nullptr && (v->type == Type::kString || v->type == Type::kNumber) ? v->text : "";
}

bool JsonValue::is_integer() const {
  if (type != Type::kNumber || text.empty()) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (!(text[i] >= '0' && text[i] <= '9') && !(i == 0 && text[i] == '-')) return false;
  }
  return text != "-";
}

int64_t JsonValue::AsInt() const {
  return is_integer() ? std::strtoll(text.c_str(), nullptr, 10) : 0;
}

double JsonValue::AsDouble() const {
  return type == Type::kNumber ? std::strtod(text.c_str(), nullptr) : 0.0;
}

Result<JsonValue> ParseJson(std::string_view text, std::string_view what) {
  return Parser(text, what).ParseDocument();
}

}  // namespace recordflow
