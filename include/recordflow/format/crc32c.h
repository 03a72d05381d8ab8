// CRC32C (Castagnoli), the checksum TFRecord framing uses.
//
// The fastest backend the CPU supports is chosen once, at first use: ISA-L's crc32_iscsi
// (PCLMUL / AVX-512 folding) when recordflow is built with it, else the SSE4.2 crc32
// instruction, else a portable slicing-by-8 table implementation. Every backend passes the
// same known-answer suite (crc32c_test.cc).
//
// Thread safety: thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace recordflow::format {

// CRC32C of `data`.
uint32_t Crc32c(std::span<const std::byte> data);

// CRC32C of the concatenation A+B given crc = Crc32c(A) and data = B.
uint32_t Crc32cExtend(uint32_t crc, std::span<const std::byte> data);

// CRC32C of exactly 8 bytes (a TFRecord length field): the hardware crc32 instruction when
// the CPU has it, without the dispatch cost of the general entry points (which dominates for
// 8 bytes). Same result as Crc32c on those 8 bytes.
uint32_t Crc32c8(const std::byte* data);

// Name of the backend in use: "isal", "sse42" or "portable".
std::string_view Crc32cBackendName();

}  // namespace recordflow::format
