// Fuzzes the image ops' decode entry points on untrusted bytes: ImageDecoder's header read and
// fused crop / DCT-scaled region decode (both warning policies), then the resampler and
// normalize on what came out. The crop and target size are derived from the input's length
// and last bytes, so that every seed exercises several crops.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "recordflow/image/ops.h"

using namespace recordflow::image;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  static ImageDecoder* decoder = new ImageDecoder();  // reused, as the presets do
  auto header = decoder->ReadHeader(bytes);
  const uint32_t salt = size >= 2 ? data[size - 1] * 256u + data[size - 2] : 0;
  RegionDecodeOptions o;
  o.max_pixels = 1 << 20;
  o.max_scans = 50;  // bounded time per input (the 704-scan seed hits it)
  o.warnings = (salt & 1) ? JpegWarnings::kCount : JpegWarnings::kError;
  o.fancy_upsampling = (salt & 2) == 0;
  if (header.ok() && header->width > 0 && header->height > 0) {
    const int w = header->width, h = header->height;
    const int x = static_cast<int>(salt % w), y = static_cast<int>((salt >> 3) % h);
    // Mostly windows inside the image; every 8th one may stick out (must be kInvalidArgument).
    const int cw = (salt & 0x1C) == 0 ? w : w - x, ch = (salt & 0x1C) == 0 ? h : h - y;
    o.crop =
        Rect{x, y, 1 + static_cast<int>((salt >> 5) % cw), 1 + static_cast<int>((salt >> 7) % ch)};
    o.target_width = 1 + static_cast<int>(salt % 64);
    o.target_height = 1 + static_cast<int>((salt >> 6) % 64);
  }
  DecodedRegion region;
  recordflow::Status s = decoder->DecodeRegion(bytes, o, &region);
  if (header.ok() && o.crop.has_value() &&
      !CheckCropWindow(*o.crop, header->width, header->height).ok() && s.ok()) {
    __builtin_trap();  // a window outside the image must never decode
  }
  if (s.ok()) {
    const Image& img = region.image;
    if (img.channels != 3 || img.width <= 0 || img.height <= 0 ||
        img.pixels.size() != img.row_bytes() * static_cast<size_t>(img.height)) {
      __builtin_trap();
    }
    if (region.box.x < 0 || region.box.y < 0 ||
        region.box.x + region.box.width > img.width + 1e-6 ||
        region.box.y + region.box.height > img.height + 1e-6) {
      __builtin_trap();
    }
    const int tw = o.target_width > 0 ? o.target_width : 7;
    const int th = o.target_height > 0 ? o.target_height : 5;
    std::vector<float> resized;
    const Interpolation mode = static_cast<Interpolation>(salt % 3);
    if (!ResampleToFloat(img, region.box, tw, th, mode, &resized).ok()) __builtin_trap();
    std::vector<std::byte> out(resized.size() * 2);
    NormalizeOptions n;
    n.type = TensorType::kFloat16;
    n.layout = Layout::kCHW;
    n.flip = true;
    if (!NormalizeInto(resized, tw, th, n, out).ok()) __builtin_trap();
  }
  return 0;
}
