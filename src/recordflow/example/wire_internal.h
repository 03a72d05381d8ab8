// Protobuf wire-format primitives for the Example codec. Bounds-checked: every read checks the
// remaining length first and reports malformed input instead of reading past the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

namespace recordflow::example::internal {

// The hot readers below are small; inlining them into the visitors' loops matters.
#if defined(__GNUC__)
#define RF_WIRE_INLINE __attribute__((always_inline)) inline
#else
#define RF_WIRE_INLINE inline
#endif

enum WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5,
};

inline constexpr int kMaxGroupDepth = 64;

class WireReader {
 public:
  explicit WireReader(std::span<const std::byte> data)
      : begin_(reinterpret_cast<const uint8_t*>(data.data())),
        p_(begin_),
        end_(begin_ + data.size()) {}

  bool done() const { return p_ >= end_; }
  size_t offset() const { return static_cast<size_t>(p_ - begin_); }
  // Where the value that failed to decode starts.
  size_t error_offset() const { return error_offset_; }
  // Why the last call failed, for messages.
  const char* error() const { return error_; }

  RF_WIRE_INLINE bool ReadVarint(uint64_t* value) {
    // Fast path: one byte.
    if (p_ < end_ && *p_ < 0x80) {
      *value = *p_++;
      return true;
    }
    uint64_t result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= end_) return Fail("truncated varint");
      uint8_t b = *p_++;
      result |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (b < 0x80) {
        *value = result;
        return true;
      }
    }
    return Fail("varint longer than 10 bytes");
  }

  RF_WIRE_INLINE bool ReadTag(uint32_t* field, uint32_t* wire_type) {
    const uint8_t* start = p_;
    uint64_t tag;
    if (!ReadVarint(&tag)) return false;
    *field = static_cast<uint32_t>(tag >> 3);
    *wire_type = static_cast<uint32_t>(tag & 7);
    if (*field == 0 || tag > 0xffffffffu) {
      p_ = start;
      return Fail("invalid field number");
    }
    tag_start_ = start;
    return true;
  }

  RF_WIRE_INLINE bool ReadLengthDelimited(std::span<const std::byte>* out) {
    uint64_t len;
    if (!ReadVarint(&len)) return false;
    if (len > static_cast<uint64_t>(end_ - p_)) return Fail("length past the end of the message");
    *out = std::span<const std::byte>(reinterpret_cast<const std::byte*>(p_), len);
    p_ += len;
    return true;
  }

  RF_WIRE_INLINE bool ReadFixed32(uint32_t* out) {
    if (end_ - p_ < 4) return Fail("truncated fixed32");
    std::memcpy(out, p_, 4);
    p_ += 4;
    return true;
  }

  // Skips the value of a field of `wire_type` whose tag was just read (field `field`).
  bool Skip(uint32_t field, uint32_t wire_type, int depth = 0) {
    switch (wire_type) {
      case kVarint: {
        uint64_t v;
        return ReadVarint(&v);
      }
      case kFixed64:
        return SkipFixed(8, "truncated fixed64");
      case kLengthDelimited: {
        std::span<const std::byte> s;
        return ReadLengthDelimited(&s);
      }
      case kFixed32:
        return SkipFixed(4, "truncated fixed32");
      case kStartGroup: {
        if (depth >= kMaxGroupDepth) return Fail("nesting too deep");
        while (true) {
          uint32_t f, wt;
          if (done()) return Fail("unterminated group");
          if (!ReadTag(&f, &wt)) return false;
          if (wt == kEndGroup) return f == field ? true : Fail("mismatched end-group tag");
          if (!Skip(f, wt, depth + 1)) return false;
        }
      }
      case kEndGroup:
        return Fail("unexpected end-group tag");
      default:
        return Fail("invalid wire type");
    }
  }

  // Skips a fixed-width value of `n` bytes; `truncated` is the error when fewer are left.
  bool SkipFixed(ptrdiff_t n, const char* truncated) {
    if (end_ - p_ < n) return Fail(truncated);
    p_ += n;
    return true;
  }

  bool Fail(const char* why) {
    error_ = why;
    error_offset_ = static_cast<size_t>(p_ - begin_);
    return false;
  }
  // For errors about the field whose tag was read last: points at that tag.
  bool FailAtTag(const char* why) {
    Fail(why);
    error_offset_ = static_cast<size_t>(tag_start_ - begin_);
    return false;
  }

 private:
  const uint8_t* begin_;
  const uint8_t* p_;
  const uint8_t* end_;
  const uint8_t* tag_start_ = begin_;
  const char* error_ = "";
  size_t error_offset_ = 0;
};

inline void AppendVarint(std::string* out, uint64_t v) {
  char buf[10];
  int n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  out->append(buf, n);
}

inline size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

inline void AppendTag(std::string* out, uint32_t field, uint32_t wire_type) {
  AppendVarint(out, (static_cast<uint64_t>(field) << 3) | wire_type);
}

}  // namespace recordflow::example::internal
