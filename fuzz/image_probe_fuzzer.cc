// Fuzzes the image layer's entry points on untrusted bytes: the header probe (with and without
// the structure check) and the decoders (8 and 16 bits, every channel count), under small
// pixel and progressive-scan limits so that every input takes bounded time.
#include <cstddef>
#include <cstdint>
#include <span>

#include "recordflow/image/image.h"

using namespace recordflow::image;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  auto info = Probe(bytes);
  ProbeOptions strict;
  strict.check_structure = true;
  strict.max_pixels = 1 << 20;  // bounds the IDAT inflate per input
  auto checked = Probe(bytes, strict);
  // The structure walk only adds checks: it never accepts what the header probe refuses.
  if (checked.ok() && !info.ok()) __builtin_trap();
  if (info.ok()) {
    if (info->width <= 0 || info->height <= 0 || info->channels < 1 || info->channels > 4) {
      __builtin_trap();
    }
    DecodeOptions options;
    options.max_pixels = 1 << 20;
    options.max_scans = 50;  // bounded time per input (the 704-scan seed hits it)
    options.apply_orientation = true;
    static constexpr int kChannels[4] = {0, 1, 3, 4};
    options.desired_channels = kChannels[size % 4];
    auto image = Decode(bytes, options);
    auto sixteen = Decode16(bytes, options);
    if (sixteen.ok() &&
        sixteen->pixels.size() != sixteen->row_samples() * static_cast<size_t>(sixteen->height)) {
      __builtin_trap();
    }
    if (image.ok()) {
      if (image->pixels.size() != image->row_bytes() * static_cast<size_t>(image->height)) {
        __builtin_trap();
      }
      auto small = Resize(*image, 7, 5);
      (void)small;
    }
  }
  return 0;
}
