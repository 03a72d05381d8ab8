// Pixel transforms: channel conversion, EXIF orientation, separable resampling.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "image_internal.h"
#include "recordflow/image/image.h"

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

namespace {

// For each output position, the first input index and the normalized weights of the inputs
// that contribute to it.
struct Coefficients {
  std::vector<int> first;
  std::vector<int> count;
  std::vector<float> weights;  // max_count per output position
  int max_count = 0;
};

Coefficients ComputeCoefficients(int in_size, int out_size, ResizeFilter filter) {
  Coefficients k;
  const double scale = static_cast<double>(in_size) / out_size;
  const bool shrinking = scale > 1.0;
  // Triangle support is 1 input pixel; widened by the scale when shrinking (antialias). The
  // area filter covers exactly the output pixel's footprint (half-width scale / 2).
  double support;
  if (filter == ResizeFilter::kArea && shrinking) {
    support = scale / 2;
  } else {
    support = shrinking ? scale : 1.0;
  }
  k.max_count = static_cast<int>(std::ceil(support)) * 2 + 2;
  k.first.resize(out_size);
  k.count.resize(out_size);
  k.weights.assign(static_cast<size_t>(out_size) * k.max_count, 0.0f);
  std::vector<double> w(k.max_count);
  for (int o = 0; o < out_size; ++o) {
    const double center = (o + 0.5) * scale;
    int lo = static_cast<int>(std::floor(center - support));
    int hi = static_cast<int>(std::ceil(center + support));
    lo = std::max(lo, 0);
    hi = std::min(hi, in_size);
    hi = std::min(hi, lo + k.max_count);
    double total = 0;
    int n = 0;
    for (int i = lo; i < hi; ++i, ++n) {
      double weight;
      if (filter == ResizeFilter::kArea && shrinking) {
        // Overlap of input pixel [i, i+1) with the footprint [center - s, center + s).
        weight = std::max(
            0.0, std::min<double>(i + 1, center + support) - std::max<double>(i, center - support));
      } else {
        const double t = std::abs((i + 0.5 - center) / (shrinking ? scale : 1.0));
        weight = t < 1.0 ? 1.0 - t : 0.0;
      }
      w[n] = weight;
      total += weight;
    }
    if (total <= 0) {  // cannot happen for sane sizes; keep nearest as a fallback
      lo = std::min(static_cast<int>(center), in_size - 1);
      n = 1;
      w[0] = 1;
      total = 1;
    }
    k.first[o] = lo;
    k.count[o] = n;
    for (int j = 0; j < n; ++j)
      k.weights[static_cast<size_t>(o) * k.max_count + j] = static_cast<float>(w[j] / total);
  }
  return k;
}

uint8_t ClampToByte(float v) {
  const float r = std::nearbyint(v);
  return static_cast<uint8_t>(r < 0 ? 0 : (r > 255 ? 255 : r));
}

}  // namespace

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
  const int c = image.channels;
  const Coefficients kx = ComputeCoefficients(image.width, width, options.filter);
  const Coefficients ky = ComputeCoefficients(image.height, height, options.filter);
  // Horizontal pass into floats (in_height x width), then vertical into bytes.
  std::vector<float> tmp(static_cast<size_t>(image.height) * width * c);
  for (int y = 0; y < image.height; ++y) {
    const uint8_t* src = image.row(y);
    float* dst = &tmp[static_cast<size_t>(y) * width * c];
    for (int x = 0; x < width; ++x) {
      const float* w = &kx.weights[static_cast<size_t>(x) * kx.max_count];
      const uint8_t* s = src + static_cast<size_t>(kx.first[x]) * c;
      for (int ch = 0; ch < c; ++ch) {
        float acc = 0;
        for (int j = 0; j < kx.count[x]; ++j) acc += w[j] * s[j * c + ch];
        dst[x * c + ch] = acc;
      }
    }
  }
  Image out;
  out.width = width;
  out.height = height;
  out.channels = c;
  out.pixels.resize(out.row_bytes() * height);
  const size_t row = static_cast<size_t>(width) * c;
  std::vector<float> acc(row);
  for (int y = 0; y < height; ++y) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    const float* w = &ky.weights[static_cast<size_t>(y) * ky.max_count];
    for (int j = 0; j < ky.count[y]; ++j) {
      const float* src = &tmp[static_cast<size_t>(ky.first[y] + j) * row];
      for (size_t i = 0; i < row; ++i) acc[i] += w[j] * src[i];
    }
    uint8_t* dst = out.row(y);
    for (size_t i = 0; i < row; ++i) dst[i] = ClampToByte(acc[i]);
  }
  return out;
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
