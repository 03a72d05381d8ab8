#include "recordflow/core/json.h"

#include <cmath>
#include <cstdio>

#include "recordflow/core/utf8.h"

namespace recordflow {

std::string JsonQuote(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const size_t length = Utf8SequenceLength(text, i);
      if (length == 0) {
        out += "\\ufffd";
        i += 1;
      } else {
        out.append(text.substr(i, length));
        i += length;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xF];
        } else {
          out += static_cast<char>(c);
        }
    }
    i += 1;
  }
  out += '"';
  return out;
}

void JsonWriter::AddKey(std::string_view key) {
  const bool spaced = layout_ == JsonLayout::kSpaced;
  if (body_.size() > 1) body_ += spaced ? ", " : ",";
  body_ += JsonQuote(key);
  body_ += spaced ? ": " : ":";
}

JsonWriter& JsonWriter::AddString(std::string_view key, std::string_view value) {
  AddKey(key);
  body_ += JsonQuote(value);
  return *this;
}

JsonWriter& JsonWriter::AddInt(std::string_view key, int64_t value) {
  AddKey(key);
  body_ += std::to_string(value);
  return *this;
}

JsonWriter& JsonWriter::AddUint(std::string_view key, uint64_t value) {
  AddKey(key);
  body_ += std::to_string(value);
  return *this;
}

JsonWriter& JsonWriter::AddDouble(std::string_view key, double value) {
  AddKey(key);
  if (!std::isfinite(value)) {
    body_ += "null";
  } else {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.6g", value);
    body_ += buf;
  }
  return *this;
}

JsonWriter& JsonWriter::AddBool(std::string_view key, bool value) {
  AddKey(key);
  body_ += value ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::AddRaw(std::string_view key, std::string_view json) {
  AddKey(key);
  body_ += json;
  return *this;
}

std::string JsonArray(const std::vector<std::string>& items, JsonLayout layout) {
  const char* separator = layout == JsonLayout::kSpaced ? ", " : ",";
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += separator;
    out += items[i];
  }
  return out + "]";
}

}  // namespace recordflow
