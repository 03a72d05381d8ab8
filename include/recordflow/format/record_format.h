// The TFRecord byte layout, mirrored from docs/format.md. Reader and writer share these.
//
//   record  := length  length_crc  payload  payload_crc
//   length      : uint64, little-endian: the payload size in bytes
//   length_crc  : uint32, little-endian: MaskCrc(Crc32c(the 8 length bytes))
//   payload     : `length` bytes (usually a serialized tf.train.Example)
//   payload_crc : uint32, little-endian: MaskCrc(Crc32c(payload))
//
// A file is a sequence of records with nothing between them. A GZIP or ZLIB file is one
// compressed stream whose decompressed bytes are that sequence.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "recordflow/format/crc32c.h"

namespace recordflow::format {

inline constexpr size_t kLengthSize = 8;
inline constexpr size_t kCrcSize = 4;
inline constexpr size_t kHeaderSize = kLengthSize + kCrcSize;          // 12
inline constexpr size_t kFooterSize = kCrcSize;                        // 4
inline constexpr size_t kFramingOverhead = kHeaderSize + kFooterSize;  // 16
inline constexpr uint32_t kCrcMaskDelta = 0xa282ead8u;

// Masking keeps a CRC stored inside CRC'd data from weakening it: rotate right by 15 bits,
// then add a constant.
constexpr uint32_t MaskCrc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kCrcMaskDelta; }
constexpr uint32_t UnmaskCrc(uint32_t masked) {
  uint32_t rot = masked - kCrcMaskDelta;
  return (rot >> 17) | (rot << 15);
}

inline uint64_t DecodeFixed64(const std::byte* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}
inline uint32_t DecodeFixed32(const std::byte* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap32(v);
  return v;
}
inline void EncodeFixed64(std::byte* p, uint64_t v) {
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  std::memcpy(p, &v, sizeof(v));
}
inline void EncodeFixed32(std::byte* p, uint32_t v) {
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap32(v);
  std::memcpy(p, &v, sizeof(v));
}

// Writes the 12-byte header for a payload of `length` bytes.
inline void EncodeHeader(std::byte* header, uint64_t length) {
  EncodeFixed64(header, length);
  EncodeFixed32(header + kLengthSize, MaskCrc(Crc32c8(header)));
}

// True when the header's stored length CRC matches its length bytes.
inline bool HeaderCrcMatches(const std::byte* header) {
  return UnmaskCrc(DecodeFixed32(header + kLengthSize)) == Crc32c8(header);
}

}  // namespace recordflow::format
