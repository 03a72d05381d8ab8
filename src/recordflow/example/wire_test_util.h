// Protobuf wire pieces for tests that need bytes SerializeExample cannot produce (unknown
// fields, lying lengths, nesting).
#pragma once

#include <cstdint>
#include <string>

namespace recordflow::example::testing {

inline std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
  return out;
}

// A length-delimited (wire type 2) field `field` holding `payload`.
inline std::string LengthDelimited(uint64_t field, const std::string& payload) {
  return Varint(field << 3 | 2) + Varint(payload.size()) + payload;
}

}  // namespace recordflow::example::testing
