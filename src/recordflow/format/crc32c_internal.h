#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace recordflow::format::internal {

// One CRC32C implementation. `extend` takes and returns a finalized CRC (as Crc32cExtend).
struct Crc32cBackend {
  const char* name;
  uint32_t (*extend)(uint32_t crc, const std::byte* data, size_t size);
  bool (*supported)();  // whether this CPU and build can run it
};

// Every backend compiled into this binary, supported here or not, portable first.
std::span<const Crc32cBackend> AllCrc32cBackends();

}  // namespace recordflow::format::internal
