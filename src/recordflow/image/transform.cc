// Pixel transforms: channel conversion, EXIF orientation, separable resampling.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "image_internal.h"
#include "recordflow/image/image.h"
#include "recordflow/image/ops.h"

namespace recordflow::image {
namespace internal {

Image ConvertChannels(const Image& image, int channels) {
  if (channels == image.channels) return image;
  Image out;
  out.width = image.width;
  out.height = image.height;
  out.channels = channels;
  out.pixels.resize(out.row_bytes() * out.height);
  const size_t n = static_cast<size_t>(image.width) * image.height;
  const int in_c = image.channels;
  const bool in_color = in_c >= 3;
  const bool in_alpha = in_c == 2 || in_c == 4;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = &image.pixels[i * in_c];
    uint8_t* q = &out.pixels[i * channels];
    uint8_t r = p[0], g = in_color ? p[1] : p[0], b = in_color ? p[2] : p[0];
    uint8_t a = in_alpha ? p[in_c - 1] : 255;
    if (channels >= 3) {
      q[0] = r, q[1] = g, q[2] = b;
      if (channels == 4) q[3] = a;
    } else {
      // BT.601 luma in fixed point, as libjpeg's rgb_gray_convert.
      q[0] = in_color ? static_cast<uint8_t>((19595 * r + 38470 * g + 7471 * b + 32768) >> 16) : r;
      if (channels == 2) q[1] = a;
    }
  }
  return out;
}

}  // namespace internal

Image ApplyOrientation(const Image& image, int orientation) {
  if (orientation < 2 || orientation > 8) return image;
  const int w = image.width, h = image.height, c = image.channels;
  const bool swap = orientation >= 5;
  Image out;
  out.width = swap ? h : w;
  out.height = swap ? w : h;
  out.channels = c;
  out.pixels.resize(out.row_bytes() * out.height);
  for (int y = 0; y < out.height; ++y) {
    uint8_t* dst = out.row(y);
    for (int x = 0; x < out.width; ++x) {
      int sx = x, sy = y;
      switch (orientation) {
        case 2:
          sx = w - 1 - x;
          sy = y;
          break;
        case 3:
          sx = w - 1 - x;
          sy = h - 1 - y;
          break;
        case 4:
          sx = x;
          sy = h - 1 - y;
          break;
        case 5:
          sx = y;
          sy = x;
          break;
        case 6:
          sx = y;
          sy = h - 1 - x;
          break;
        case 7:
          sx = w - 1 - y;
          sy = h - 1 - x;
          break;
        case 8:
          sx = w - 1 - y;
          sy = x;
          break;
      }
      std::memcpy(dst + static_cast<size_t>(x) * c, image.row(sy) + static_cast<size_t>(sx) * c, c);
    }
  }
  return out;
}

Result<Image> Resize(const Image& image, int width, int height, ResizeOptions options) {
  if (image.width <= 0 || image.height <= 0 || image.channels < 1 ||
      image.pixels.size() != image.row_bytes() * image.height) {
    return InvalidArgumentError("Resize: empty or inconsistent image");
  }
  if (width <= 0 || height <= 0) {
    return InvalidArgumentError("Resize: target size must be positive (got " +
                                std::to_string(width) + "x" + std::to_string(height) + ")");
  }
  if (width == image.width && height == image.height) return image;
  // The one resampler (ops.h), whose SIMD kernels give the same bytes as its scalar ones
  // (no FP contraction; ops_test.cc checks), so a conversion is identical on every machine.
  return Resample(
      image, width, height,
      options.filter == ResizeFilter::kArea ? Interpolation::kArea : Interpolation::kBilinear);
}

void SizeForShorterSide(int width, int height, int shorter, int* out_width, int* out_height) {
  if (width <= height) {
    *out_width = shorter;
    *out_height =
        std::max(1, static_cast<int>(std::lround(static_cast<double>(height) * shorter / width)));
  } else {
    *out_height = shorter;
    *out_width =
        std::max(1, static_cast<int>(std::lround(static_cast<double>(width) * shorter / height)));
  }
}

}  // namespace recordflow::image
