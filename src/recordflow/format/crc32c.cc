#include "recordflow/format/crc32c.h"

#include <array>
#include <bit>
#include <cstring>

#include "recordflow/format/crc32c_internal.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif
#if defined(RF_HAVE_ISAL)
#include <isa-l/crc.h>
#endif

namespace recordflow::format {
namespace internal {
namespace {

constexpr uint32_t kCastagnoliReflected = 0x82f63b78u;

// Tables for slicing-by-8: kTables[k][b] is the CRC of byte b followed by k zero bytes.
constexpr std::array<std::array<uint32_t, 256>, 8> MakeTables() {
  std::array<std::array<uint32_t, 256>, 8> t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b;
    for (int i = 0; i < 8; ++i) crc = (crc >> 1) ^ ((crc & 1) ? kCastagnoliReflected : 0);
    t[0][b] = crc;
  }
  for (uint32_t b = 0; b < 256; ++b) {
    for (int k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  }
  return t;
}
constexpr auto kTables = MakeTables();

uint32_t ExtendPortable(uint32_t crc, const std::byte* p, size_t n) {
  const auto* data = reinterpret_cast<const uint8_t*>(p);
  uint32_t c = ~crc;
  while (n > 0 && (reinterpret_cast<uintptr_t>(data) & 7) != 0) {
    c = (c >> 8) ^ kTables[0][(c ^ *data++) & 0xff];
    --n;
  }
  while (n >= 8) {
    uint32_t lo;
    uint32_t hi;
    std::memcpy(&lo, data, 4);
    std::memcpy(&hi, data + 4, 4);
    if constexpr (std::endian::native == std::endian::big) {
      lo = __builtin_bswap32(lo);
      hi = __builtin_bswap32(hi);
    }
    lo ^= c;
    c = kTables[7][lo & 0xff] ^ kTables[6][(lo >> 8) & 0xff] ^ kTables[5][(lo >> 16) & 0xff] ^
        kTables[4][lo >> 24] ^ kTables[3][hi & 0xff] ^ kTables[2][(hi >> 8) & 0xff] ^
        kTables[1][(hi >> 16) & 0xff] ^ kTables[0][hi >> 24];
    data += 8;
    n -= 8;
  }
  while (n-- > 0) c = (c >> 8) ^ kTables[0][(c ^ *data++) & 0xff];
  return ~c;
}

bool AlwaysSupported() { return true; }

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t ExtendSse42(uint32_t crc, const std::byte* p, size_t n) {
  const auto* data = reinterpret_cast<const uint8_t*>(p);
  uint64_t c = ~crc;
  while (n > 0 && (reinterpret_cast<uintptr_t>(data) & 7) != 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *data++);
    --n;
  }
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, data, 8);
    c = _mm_crc32_u64(c, word);
    data += 8;
    n -= 8;
  }
  while (n-- > 0) c = _mm_crc32_u8(static_cast<uint32_t>(c), *data++);
  return ~static_cast<uint32_t>(c);
}
bool Sse42Supported() { return __builtin_cpu_supports("sse4.2"); }
#endif

#if defined(RF_HAVE_ISAL)
uint32_t ExtendIsal(uint32_t crc, const std::byte* p, size_t n) {
  // crc32_iscsi neither pre- nor post-inverts, and takes an int length.
  uint32_t c = ~crc;
  auto* data = reinterpret_cast<unsigned char*>(const_cast<std::byte*>(p));
  constexpr size_t kChunk = size_t{1} << 30;
  while (n > 0) {
    size_t len = n < kChunk ? n : kChunk;
    c = crc32_iscsi(data, static_cast<int>(len), c);
    data += len;
    n -= len;
  }
  return ~c;
}
#endif

constexpr Crc32cBackend kBackends[] = {
    {"portable", &ExtendPortable, &AlwaysSupported},
#if defined(__x86_64__)
    {"sse42", &ExtendSse42, &Sse42Supported},
#endif
#if defined(RF_HAVE_ISAL)
    {"isal", &ExtendIsal, &AlwaysSupported},  // ISA-L dispatches on the CPU itself.
#endif
};

const Crc32cBackend& ChooseBackend() {
  // The last supported backend in the table is the fastest.
  const Crc32cBackend* best = &kBackends[0];
  for (const auto& b : kBackends) {
    if (b.supported()) best = &b;
  }
  return *best;
}

const Crc32cBackend& ActiveBackend() {
  static const Crc32cBackend& backend = ChooseBackend();
  return backend;
}

}  // namespace

std::span<const Crc32cBackend> AllCrc32cBackends() { return kBackends; }

}  // namespace internal

uint32_t Crc32cExtend(uint32_t crc, std::span<const std::byte> data) {
  return internal::ActiveBackend().extend(crc, data.data(), data.size());
}

uint32_t Crc32c(std::span<const std::byte> data) { return Crc32cExtend(0, data); }

namespace {
#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t Crc32c8Sse42(const std::byte* data) {
  uint64_t word;
  std::memcpy(&word, data, 8);
  return ~static_cast<uint32_t>(_mm_crc32_u64(0xffffffffu, word));
}
const bool kHaveSse42 = __builtin_cpu_supports("sse4.2");
#endif
}  // namespace

uint32_t Crc32c8(const std::byte* data) {
#if defined(__x86_64__)
  if (kHaveSse42) return Crc32c8Sse42(data);
#endif
  return internal::AllCrc32cBackends()[0].extend(0, data, 8);
}

std::string_view Crc32cBackendName() { return internal::ActiveBackend().name; }

}  // namespace recordflow::format
