// Fuzzes the image layer's entry points on untrusted bytes: the header probe (with and without
// the JPEG structure walk) and the decoders, under a small pixel limit.
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
  auto checked = Probe(bytes, strict);
  // The structure walk only adds checks: it never accepts what the header probe refuses.
  if (checked.ok() && !info.ok()) __builtin_trap();
  if (info.ok()) {
    if (info->width <= 0 || info->height <= 0 || info->channels < 1 || info->channels > 4) {
      __builtin_trap();
    }
    DecodeOptions options;
    options.max_pixels = 1 << 20;
    options.apply_orientation = true;
    auto image = Decode(bytes, options);
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
