#include "gcs_json_internal.h"

#include <cctype>
#include <cstdint>

namespace recordflow::io::internal {
namespace {

class Parser {
 public:
  Parser(std::string_view text, std::string_view what) : s_(text), what_(what) {}

  Result<JsonValue> Document() {
    JsonValue v;
    RF_RETURN_IF_ERROR(Value(&v, 0));
    SkipSpace();
    if (pos_ != s_.size()) return Error("trailing bytes after the JSON value");
    return v;
  }

 private:
  Status Error(const std::string& why) const {
    return InvalidArgumentError("malformed JSON in " + std::string(what_) + " at byte offset " +
                                std::to_string(pos_) + ": " + why);
  }
  void SkipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Status Value(JsonValue* v, int depth) {
    if (depth > 64) return Error("nesting deeper than 64");
    SkipSpace();
    if (pos_ >= s_.size()) return Error("unexpected end");
    const char c = s_[pos_];
    if (c == '{') return Object(v, depth);
    if (c == '[') return Array(v, depth);
    if (c == '"') {
      v->kind = JsonValue::Kind::kString;
      return String(&v->text);
    }
    if (Literal("true") || Literal("false")) {
      v->kind = JsonValue::Kind::kBool;
      v->boolean = s_[pos_ - 1] == 'e' && s_[pos_ - 2] == 'u';
      return Status::OK();
    }
    if (Literal("null")) return Status::OK();
    const size_t start = pos_;
    while (pos_ < s_.size() &&
           (std::isdigit(static_cast<unsigned char>(s_[pos_])) != 0 || s_[pos_] == '-' ||
            s_[pos_] == '+' || s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
    }
    if (pos_ == start) return Error(std::string("unexpected character '") + c + "'");
    v->kind = JsonValue::Kind::kNumber;
    v->text = std::string(s_.substr(start, pos_ - start));
    return Status::OK();
  }

  Status Object(JsonValue* v, int depth) {
    v->kind = JsonValue::Kind::kObject;
    ++pos_;
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return Status::OK();
    }
    while (true) {
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '"') return Error("expected a member name");
      std::string key;
      RF_RETURN_IF_ERROR(String(&key));
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != ':') return Error("expected ':'");
      ++pos_;
      JsonValue member;
      RF_RETURN_IF_ERROR(Value(&member, depth + 1));
      v->member_names.push_back(std::move(key));
      v->member_values.push_back(std::move(member));
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return Status::OK();
      }
      return Error("expected ',' or '}'");
    }
  }

  Status Array(JsonValue* v, int depth) {
    v->kind = JsonValue::Kind::kArray;
    ++pos_;
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return Status::OK();
    }
    while (true) {
      JsonValue item;
      RF_RETURN_IF_ERROR(Value(&item, depth + 1));
      v->items.push_back(std::move(item));
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return Status::OK();
      }
      return Error("expected ',' or ']'");
    }
  }

  bool Hex4(uint32_t* out) {
    if (pos_ + 4 > s_.size()) return false;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = s_[pos_++];
      v <<= 4;
      if (h >= '0' && h <= '9') {
        v |= static_cast<uint32_t>(h - '0');
      } else if (h >= 'a' && h <= 'f') {
        v |= static_cast<uint32_t>(h - 'a' + 10);
      } else if (h >= 'A' && h <= 'F') {
        v |= static_cast<uint32_t>(h - 'A' + 10);
      } else {
        return false;
      }
    }
    *out = v;
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

  Status String(std::string* out) {
    ++pos_;  // the opening quote
    while (pos_ < s_.size()) {
      const char c = s_[pos_++];
      if (c == '"') return Status::OK();
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) break;
      const char e = s_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out->push_back(e);
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          uint32_t cp = 0;
          if (!Hex4(&cp)) return Error("bad \\u escape");
          if (cp >= 0xD800 && cp < 0xDC00 && s_.substr(pos_, 2) == "\\u") {
            pos_ += 2;
            uint32_t lo = 0;
            if (!Hex4(&lo) || lo < 0xDC00 || lo > 0xDFFF) return Error("bad surrogate pair");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          return Error("bad escape");
      }
    }
    return Error("unterminated string");
  }

  std::string_view s_;
  std::string_view what_;
  size_t pos_ = 0;
};

}  // namespace

const JsonValue* JsonValue::Get(std::string_view key) const {
  for (size_t i = 0; i < member_names.size(); ++i) {
    if (member_names[i] == key) return &member_values[i];
  }
  return nullptr;
}

std::string JsonValue::GetText(std::string_view key) const {
  const JsonValue* v = Get(key);
  return v == nullptr ? "" : v->text;
}

Result<JsonValue> ParseJson(std::string_view text, std::string_view what) {
  return Parser(text, what).Document();
}

}  // namespace recordflow::io::internal
