#include "recordflow/image/warp_internal.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace recordflow::image::internal {
namespace {

constexpr double kOne = 4294967296.0;    // 2^32: the fixed-point unit
constexpr double kLimit = 1073741824.0;  // 2^30 pixels: no overflow of int64 32.32 values

// c(x) = c0 + x * dc (32.32 fixed point); the x in [0, width) where 0 <= c(x) < limit, found
// from the double solution and then made exact against the integer values (the valid set of a
// linear function is an interval, so stepping its ends settles it).
void Span(int64_t c0, int64_t dc, int64_t limit, int width, int* lo, int* hi) {
  auto in = [&](int x) {
    const int64_t c = c0 + x * dc;
    return c >= 0 && c < limit;
  };
  double a = 0, b = width;
  if (dc == 0) {
    if (!in(0)) a = b = 0;
  } else {
    const double e0 = -static_cast<double>(c0) / static_cast<double>(dc);
    const double e1 = static_cast<double>(limit - c0) / static_cast<double>(dc);
    a = std::max(0.0, std::ceil(std::min(e0, e1)) - 1);
    b = std::min(static_cast<double>(width), std::floor(std::max(e0, e1)) + 2);
  }
  int l = static_cast<int>(std::clamp(a, 0.0, static_cast<double>(width)));
  int h = static_cast<int>(std::clamp(b, 0.0, static_cast<double>(width)));
  while (l < h && !in(l)) ++l;
  while (h > l && !in(h - 1)) --h;
  if (l == h) {
    *lo = *hi = 0;
    return;
  }
  while (l > 0 && in(l - 1)) --l;
  while (h < width && in(h)) ++h;
  *lo = l;
  *hi = h;
}

int64_t Fixed(double v) { return static_cast<int64_t>(std::floor(v * kOne)); }

void Fill(uint8_t* out, int from, int to, const uint8_t* fill, int ch) {
  if (from >= to) return;
  bool same = true;
  for (int k = 1; k < ch; ++k) same = same && fill[k] == fill[0];
  if (same) {
    std::memset(out + static_cast<size_t>(from) * ch, fill[0], static_cast<size_t>(to - from) * ch);
    return;
  }
  for (int x = from; x < to; ++x) std::memcpy(out + static_cast<size_t>(x) * ch, fill, ch);
}

// The span where both coordinates, offset by `bias`, lie in [0, w_limit) x [0, h_limit).
void RowSpan(const WarpRow& r, double bias, int w_limit, int h_limit, int width, int64_t* x0,
             int64_t* dx, int64_t* y0, int64_t* dy, int* lo, int* hi) {
  *x0 = Fixed(r.sx0 + bias);
  *y0 = Fixed(r.sy0 + bias);
  *dx = Fixed(r.dx);
  *dy = Fixed(r.dy);
  int xl = 0, xh = 0, yl = 0, yh = 0;
  Span(*x0, *dx, static_cast<int64_t>(w_limit) << 32, width, &xl, &xh);
  Span(*y0, *dy, static_cast<int64_t>(h_limit) << 32, width, &yl, &yh);
  *lo = std::max(xl, yl);
  *hi = std::min(xh, yh);
  if (*hi < *lo) *hi = *lo;
}

#if defined(__x86_64__)
// RGB gather of n >= 8 pixels, 8 at a time (the caller does the remainder): positions stepped
// in four-lane int64 fixed point, offsets y * row + x * 3 as int32, one 4-byte gather per pixel
// (the caller guarantees the 4th byte is readable), packed to 24 bytes. Each block stores 28
// bytes: the caller leaves 4 writable bytes past the last block and writes them afterwards.
// Returns the number of pixels done.
__attribute__((target("avx2"))) int GatherRgbAvx2(const uint8_t* base, int32_t row, int64_t x,
                                                  int64_t dx, int64_t y, int64_t dy, int n,
                                                  uint8_t* out) {
  __m256i x_lo = _mm256_setr_epi64x(x, x + dx, x + 2 * dx, x + 3 * dx);
  __m256i y_lo = _mm256_setr_epi64x(y, y + dy, y + 2 * dy, y + 3 * dy);
  __m256i x_hi = _mm256_add_epi64(x_lo, _mm256_set1_epi64x(4 * dx));
  __m256i y_hi = _mm256_add_epi64(y_lo, _mm256_set1_epi64x(4 * dy));
  const __m256i dx8 = _mm256_set1_epi64x(8 * dx), dy8 = _mm256_set1_epi64x(8 * dy);
  const __m256i order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  const __m256i vrow = _mm256_set1_epi32(row);
  const __m256i pack = _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1, 0,
                                        1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    // High dwords (the integer parts) of pixels 0-3 and 4-7, interleaved, then put in order.
    const __m256i xi = _mm256_permutevar8x32_epi32(
        _mm256_blend_epi32(_mm256_srli_epi64(x_lo, 32), x_hi, 0xAA), order);
    const __m256i yi = _mm256_permutevar8x32_epi32(
        _mm256_blend_epi32(_mm256_srli_epi64(y_lo, 32), y_hi, 0xAA), order);
    const __m256i off = _mm256_add_epi32(_mm256_mullo_epi32(yi, vrow),
                                         _mm256_add_epi32(xi, _mm256_add_epi32(xi, xi)));
    const __m256i g = _mm256_i32gather_epi32(reinterpret_cast<const int*>(base), off, 1);
    const __m256i p = _mm256_shuffle_epi8(g, pack);
    uint8_t* o = out + static_cast<size_t>(i) * 3;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o), _mm256_castsi256_si128(p));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o + 12), _mm256_extracti128_si256(p, 1));
    x_lo = _mm256_add_epi64(x_lo, dx8);
    x_hi = _mm256_add_epi64(x_hi, dx8);
    y_lo = _mm256_add_epi64(y_lo, dy8);
    y_hi = _mm256_add_epi64(y_hi, dy8);
  }
  return i;
}

bool HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#endif

}  // namespace

bool WarpRowFits(const WarpRow& r, int width) {
  const double ex = r.sx0 + r.dx * width, ey = r.sy0 + r.dy * width;
  return std::isfinite(ex) && std::isfinite(ey) && std::abs(r.sx0) < kLimit &&
         std::abs(r.sy0) < kLimit && std::abs(ex) < kLimit && std::abs(ey) < kLimit;
}

void WarpNearestRow(const Image& image, const WarpRow& r, int width, const uint8_t* fill,
                    uint8_t* out) {
  const int ch = image.channels;
  int64_t x, dx, y, dy;
  int lo = 0, hi = 0;
  // floor(s + 0.5) in [0, size): the +0.5 is folded into the start.
  RowSpan(r, 0.5, image.width, image.height, width, &x, &dx, &y, &dy, &lo, &hi);
  x += lo * dx;
  y += lo * dy;
  const uint8_t* base = image.pixels.data();
  const size_t row = image.row_bytes();
  if (ch == 3) {
    int i = lo;
#if defined(__x86_64__)
    // The vector path needs int32 offsets, a readable 4th byte at every gathered pixel (the
    // largest offset of the span is at most its largest row and column) and 4 bytes of room
    // after its last block (written over below: by the scalar tail or the fill).
    const int n = hi - lo;
    if (n >= 16 && HasAvx2() && image.pixels.size() < (size_t{1} << 31)) {
      const int64_t x1 = x + (n - 1) * dx, y1 = y + (n - 1) * dy;
      const size_t max_off = static_cast<size_t>(std::max(y, y1) >> 32) * row +
                             static_cast<size_t>(std::max(x, x1) >> 32) * 3;
      const int blocks = (n / 8) * 8;
      if (max_off + 4 <= image.pixels.size() &&
          (static_cast<size_t>(lo) + blocks) * 3 + 4 <= static_cast<size_t>(width) * 3) {
        const int done = GatherRgbAvx2(base, static_cast<int32_t>(row), x, dx, y, dy, n,
                                       out + static_cast<size_t>(lo) * 3);
        i += done;
        x += done * dx;
        y += done * dy;
      }
    }
#endif
    for (; i < hi; ++i, x += dx, y += dy) {
      const uint8_t* s =
          base + static_cast<size_t>(y >> 32) * row + static_cast<size_t>(x >> 32) * 3;
      uint8_t* o = out + static_cast<size_t>(i) * 3;
      o[0] = s[0];
      o[1] = s[1];
      o[2] = s[2];
    }
    Fill(out, 0, lo, fill, ch);
    Fill(out, hi, width, fill, ch);
    return;
  }
  Fill(out, 0, lo, fill, ch);
  Fill(out, hi, width, fill, ch);
  for (int i = lo; i < hi; ++i, x += dx, y += dy) {
    const uint8_t* s =
        base + static_cast<size_t>(y >> 32) * row + static_cast<size_t>(x >> 32) * ch;
    std::memcpy(out + static_cast<size_t>(i) * ch, s, ch);
  }
}

void WarpBilinearInterior(const Image& image, const WarpRow& r, int width, uint8_t* out, int* lo,
                          int* hi) {
  const int ch = image.channels;
  *lo = *hi = 0;
  if (image.width < 2 || image.height < 2) return;
  int64_t x, dx, y, dy;
  // Taps floor(s) and floor(s) + 1 both inside: floor(s) in [0, size - 1).
  RowSpan(r, 0.0, image.width - 1, image.height - 1, width, &x, &dx, &y, &dy, lo, hi);
  x += *lo * dx;
  y += *lo * dy;
  const uint8_t* base = image.pixels.data();
  const size_t row = image.row_bytes();
  // 11-bit fractions: the four products sum to 2^22, times 255 stays below 2^31.
  constexpr int kBits = 11;
  constexpr uint32_t kUnit = 1u << kBits;
  for (int i = *lo; i < *hi; ++i, x += dx, y += dy) {
    const uint32_t fx = static_cast<uint32_t>(x >> (32 - kBits)) & (kUnit - 1);
    const uint32_t fy = static_cast<uint32_t>(y >> (32 - kBits)) & (kUnit - 1);
    const uint32_t w00 = (kUnit - fx) * (kUnit - fy), w01 = fx * (kUnit - fy);
    const uint32_t w10 = (kUnit - fx) * fy, w11 = fx * fy;
    const uint8_t* s0 =
        base + static_cast<size_t>(y >> 32) * row + static_cast<size_t>(x >> 32) * ch;
    const uint8_t* s1 = s0 + row;
    uint8_t* o = out + static_cast<size_t>(i) * ch;
    for (int k = 0; k < ch; ++k) {
      const uint32_t v = w00 * s0[k] + w01 * s0[k + ch] + w10 * s1[k] + w11 * s1[k + ch];
      o[k] = static_cast<uint8_t>((v + (1u << (2 * kBits - 1))) >> (2 * kBits));
    }
  }
}

}  // namespace recordflow::image::internal
