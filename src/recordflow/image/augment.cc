// Photometric and affine ops, augmentation policies, MixUp / CutMix (augment.h).
//
// Arithmetic mirrors torchvision v2's tensor kernels on uint8 input: float32 throughout, the
// same truncating (to(uint8)) or rounding (round_()) conversions, the same constants (0.2989,
// 0.587, 0.114; x / 255 as x * float(1 / 255); 255.999 on the way back), so that most ops agree
// exactly and the rest within one grey level. Loops run over flat sample arrays so that the
// compiler vectorises them.
//
// Over 600 lines: the photometric kernels, the affine warp, the policies' op tables and the batch
// mixes share the float32 helpers and the clone attribute; the planned split is one file each
// (augment_color.cc, augment_affine.cc, augment_policy.cc, augment_batch.cc) over an
// augment_internal.h, once h-vops' op chain has settled which of them it calls.
#include "recordflow/image/augment.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <string_view>

#include "kernels_internal.h"

// Hand-written AVX2 paths (hue, table lookups), taken when the CPU has AVX2.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define RF_AUGMENT_AVX2 1
#endif

#include "recordflow/image/warp_internal.h"

// The per-pixel loops are compiled twice, for x86-64-v3 (AVX2 + FMA) and baseline x86-64, and
// picked at load time (an ifunc): torchvision's float32 formulas use fused multiply-adds
// (ATen's vectorised add with alpha), which std::fma reproduces exactly on both, but only the
// v3 clone has them in hardware. Both clones give the same bits. Not under ThreadSanitizer: the
// ifunc resolver runs while the dynamic loader relocates, before TSan's runtime is up, and its
// instrumented code crashes the process at start.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RF_AUGMENT_NO_CLONES 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define RF_AUGMENT_NO_CLONES 1
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(RF_AUGMENT_NO_CLONES)
#define RF_AUGMENT_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define RF_AUGMENT_CLONES
#endif

namespace recordflow::image {
namespace {

constexpr float kGrayR = 0.2989f;
constexpr float kGrayG = 0.587f;
constexpr float kGrayB = 0.114f;

Image SameShape(const Image& image) {
  Image out;
  out.width = image.width;
  out.height = image.height;
  out.channels = image.channels;
  out.pixels.resize(image.pixels.size());
  return out;
}

Status CheckImage(const Image& image, const char* op) {
  if (image.width <= 0 || image.height <= 0 || image.channels < 1 || image.channels > 4 ||
      image.pixels.size() != image.row_bytes() * static_cast<size_t>(image.height)) {
    return InvalidArgumentError(std::string(op) +
                                ": expected a non-empty HxWxC image with 1 to 4 " +
                                "channels, got " + std::to_string(image.height) + "x" +
                                std::to_string(image.width) + "x" + std::to_string(image.channels));
  }
  return Status::OK();
}

Status CheckRgbOrGray(const Image& image, const char* op) {
  RF_RETURN_IF_ERROR(CheckImage(image, op));
  if (image.channels != 1 && image.channels != 3) {
    return InvalidArgumentError(std::string(op) + ": expected 1 or 3 channels, got " +
                                std::to_string(image.channels));
  }
  return Status::OK();
}

Status CheckFactor(double factor, const char* op) {
  if (!(factor >= 0) || !std::isfinite(factor)) {
    return InvalidArgumentError(std::string(op) + ": factor " + std::to_string(factor) +
                                " is not a finite non-negative number");
  }
  return Status::OK();
}

// float -> uint8 as torch's .to(uint8) after clamp_(0, 255): truncation.
inline uint8_t TruncU8(float v) {
  v = std::min(std::max(v, 0.0f), 255.0f);
  return static_cast<uint8_t>(v);
}

// round_() (half to even) then to(uint8).
inline uint8_t RoundU8(float v) {
  v = std::nearbyint(v);
  v = std::min(std::max(v, 0.0f), 255.0f);
  return static_cast<uint8_t>(v);
}

// The float32 grayscale torchvision computes (not yet converted).
inline float GrayF(const uint8_t* p) {
  return std::fma(static_cast<float>(p[2]), kGrayB,
                  std::fma(static_cast<float>(p[1]), kGrayG, static_cast<float>(p[0]) * kGrayR));
}

// out = clamp(x * ratio + other * (1 - ratio)) truncated: torchvision's _blend.
inline uint8_t Blend(uint8_t x, float other, float ratio, float one_minus) {
  return TruncU8(std::fma(other, one_minus, static_cast<float>(x) * ratio));
}

// torch.linspace in float32.
float Linspace(float start, float end, int steps, int i) {
  if (steps == 1) return start;
  const float step = (end - start) / static_cast<float>(steps - 1);
  if (i < steps / 2) return start + step * static_cast<float>(i);
  return end - step * static_cast<float>(steps - i - 1);
}

// Index into [0, n) with reflect padding (edge not repeated), folded as often as needed.
inline int Reflect(int i, int n) {
  if (n == 1) return 0;
  const int period = 2 * (n - 1);
  i %= period;
  if (i < 0) i += period;
  return i < n ? i : period - i;
}

RF_AUGMENT_CLONES void BrightnessKernel(const uint8_t* in, uint8_t* out, size_t n, float f) {
  for (size_t i = 0; i < n; ++i) out[i] = TruncU8(static_cast<float>(in[i]) * f);
}

// Sum of floor(gray) over `pixels` RGB pixels (contrast's mean). The terms are integers in
// [0, 255], so an integer sum is exact (and vectorises).
RF_AUGMENT_CLONES int64_t GraySum(const uint8_t* __restrict in, size_t pixels) {
  int64_t sum = 0;
  constexpr size_t kChunk = size_t{1} << 22;  // 255 * 2^22 < 2^31
  for (size_t start = 0; start < pixels; start += kChunk) {
    const size_t end = std::min(pixels, start + kChunk);
    int32_t part = 0;
    for (size_t i = start; i < end; ++i) part += static_cast<int32_t>(GrayF(in + 3 * i));
    sum += part;
  }
  return sum;
}

#if defined(RF_AUGMENT_AVX2)
// Byte c, c + 3, c + 6, c + 9 of each 128-bit lane into its four 32-bit lanes.
__attribute__((target("avx2"))) inline __m256i ChannelBytes(char c) {
  const char z = -1;
  return _mm256_setr_epi8(c, z, z, z, static_cast<char>(c + 3), z, z, z, static_cast<char>(c + 6),
                          z, z, z, static_cast<char>(c + 9), z, z, z, c, z, z, z,
                          static_cast<char>(c + 3), z, z, z, static_cast<char>(c + 6), z, z, z,
                          static_cast<char>(c + 9), z, z, z);
}

// GraySum over the first pixels, 8 at a time (RGB deinterleaved by one permute and a shuffle
// per channel, then GrayF's fused multiply-adds in its order and its truncation: the same
// terms); returns how many pixels it summed into *sum. Each 8 pixels are read as 32 bytes, so
// it stops at least 3 pixels before the end.
__attribute__((target("avx2,fma"))) size_t GraySumAvx2(const uint8_t* in, size_t pixels,
                                                       int64_t* sum) {
  const __m256i perm = _mm256_setr_epi32(0, 1, 2, 0, 3, 4, 5, 0);  // pixels 4-7 to lane 1
  const __m256i sr = ChannelBytes(0), sg = ChannelBytes(1), sb = ChannelBytes(2);
  const __m256 kr = _mm256_set1_ps(kGrayR), kg = _mm256_set1_ps(kGrayG);
  const __m256 kb = _mm256_set1_ps(kGrayB);
  const size_t limit = pixels >= 3 ? pixels - 3 : 0;
  size_t i = 0;
  int64_t total = 0;
  while (i + 8 <= limit) {
    // Each lane adds at most 255 per step: flushed to 64 bits every 2^20 steps.
    const size_t block_end = std::min(limit, i + (size_t{8} << 20));
    __m256i acc = _mm256_setzero_si256();
    for (; i + 8 <= block_end; i += 8) {
      const __m256i v = _mm256_permutevar8x32_epi32(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 3 * i)), perm);
      const __m256 r = _mm256_cvtepi32_ps(_mm256_shuffle_epi8(v, sr));
      const __m256 g = _mm256_cvtepi32_ps(_mm256_shuffle_epi8(v, sg));
      const __m256 b = _mm256_cvtepi32_ps(_mm256_shuffle_epi8(v, sb));
      const __m256 gray = _mm256_fmadd_ps(b, kb, _mm256_fmadd_ps(g, kg, _mm256_mul_ps(r, kr)));
      acc = _mm256_add_epi32(acc, _mm256_cvttps_epi32(gray));
    }
    alignas(32) int32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
    for (int32_t lane : lanes) total += lane;
  }
  *sum += total;
  return i;
}
#endif

RF_AUGMENT_CLONES void ContrastKernel(const uint8_t* __restrict in, uint8_t* __restrict out,
                                      size_t n, float ratio, float one_minus, float mean) {
  for (size_t i = 0; i < n; ++i) out[i] = Blend(in[i], mean, ratio, one_minus);
}

RF_AUGMENT_CLONES void SaturationKernel(const uint8_t* in, uint8_t* out, size_t pixels, float ratio,
                                        float one_minus) {
  // In blocks: the grayscale first (a loop the compiler vectorises), then the blends.
  constexpr size_t kBlock = 256;
  float gray[kBlock];
  for (size_t start = 0; start < pixels; start += kBlock) {
    const size_t n = std::min(kBlock, pixels - start);
    const uint8_t* p = in + 3 * start;
    uint8_t* o = out + 3 * start;
    for (size_t i = 0; i < n; ++i) gray[i] = std::floor(GrayF(p + 3 * i));
    for (size_t i = 0; i < n; ++i) {
      o[3 * i] = Blend(p[3 * i], gray[i], ratio, one_minus);
      o[3 * i + 1] = Blend(p[3 * i + 1], gray[i], ratio, one_minus);
      o[3 * i + 2] = Blend(p[3 * i + 2], gray[i], ratio, one_minus);
    }
  }
}

#if defined(RF_AUGMENT_AVX2)
// The 8 pixels of RgbFloats' register, (x, y, z) per pixel as int32 lanes in [0, 255], back to
// 24 interleaved bytes at out: exactly those bytes are written, so a caller may write where it
// read.
__attribute__((target("avx2"))) inline void StoreRgb8(__m256i x, __m256i y, __m256i z,
                                                      uint8_t* out) {
  const char z8 = -1;
  const __m256i pixel =
      _mm256_or_si256(x, _mm256_or_si256(_mm256_slli_epi32(y, 8), _mm256_slli_epi32(z, 16)));
  // Per 128-bit lane: 4 pixels' 3 low bytes to the lane's first 12 bytes; then the two
  // lanes' 12 bytes side by side.
  const __m256i packed = _mm256_shuffle_epi8(
      pixel, _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, z8, z8, z8, z8, 0, 1, 2, 4, 5,
                              6, 8, 9, 10, 12, 13, 14, z8, z8, z8, z8));
  const __m256i bytes =
      _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 7, 7));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(bytes));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out + 16), _mm256_extracti128_si256(bytes, 1));
}

// 8 RGB pixels from in (32 bytes read, 24 used) as float channels, and their grey as GrayF
// computes it (its fused multiply-adds in its order).
struct Rgb8 {
  __m256 r, g, b, grey;
};
__attribute__((target("avx2,fma"))) inline Rgb8 LoadRgb8(const uint8_t* in) {
  const __m256i v = _mm256_permutevar8x32_epi32(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in)),
      _mm256_setr_epi32(0, 1, 2, 0, 3, 4, 5, 0));  // pixels 4-7 to lane 1
  Rgb8 p;
  p.r = _mm256_cvtepi32_ps(_mm256_shuffle_epi8(v, ChannelBytes(0)));
  p.g = _mm256_cvtepi32_ps(_mm256_shuffle_epi8(v, ChannelBytes(1)));
  p.b = _mm256_cvtepi32_ps(_mm256_shuffle_epi8(v, ChannelBytes(2)));
  p.grey = _mm256_fmadd_ps(
      p.b, _mm256_set1_ps(kGrayB),
      _mm256_fmadd_ps(p.g, _mm256_set1_ps(kGrayG), _mm256_mul_ps(p.r, _mm256_set1_ps(kGrayR))));
  return p;
}

// SaturationKernel 8 pixels at a time (the floored grey, then Blend per channel in float):
// the same bits. Stops at least 3 pixels before the end (32-byte reads); in == out works.
__attribute__((target("avx2,fma"))) size_t SaturationAvx2(const uint8_t* in, uint8_t* out,
                                                          size_t pixels, float ratio,
                                                          float one_minus) {
  const __m256 vr = _mm256_set1_ps(ratio), vo = _mm256_set1_ps(one_minus);
  const __m256 lo = _mm256_setzero_ps(), hi = _mm256_set1_ps(255.0f);
  const size_t limit = pixels >= 3 ? pixels - 3 : 0;
  size_t i = 0;
  for (; i + 8 <= limit; i += 8) {
    const Rgb8 p = LoadRgb8(in + 3 * i);
    const __m256 grey = _mm256_floor_ps(p.grey);
    auto blend = [&](__m256 x) __attribute__((target("avx2,fma"))) {
      const __m256 v = _mm256_fmadd_ps(grey, vo, _mm256_mul_ps(x, vr));
      return _mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(v, lo), hi));
    };
    StoreRgb8(blend(p.r), blend(p.g), blend(p.b), out + 3 * i);
  }
  return i;
}

// GrayKernel1 / GrayKernel3 8 pixels at a time (GrayF truncated): the same bits. Stops at
// least 3 pixels before the end; in == out works for 3 output channels.
__attribute__((target("avx2,fma"))) size_t GrayAvx2(const uint8_t* in, uint8_t* out, size_t pixels,
                                                    int out_channels) {
  const size_t limit = pixels >= 3 ? pixels - 3 : 0;
  size_t i = 0;
  for (; i + 8 <= limit; i += 8) {
    const __m256i g = _mm256_cvttps_epi32(LoadRgb8(in + 3 * i).grey);  // in [0, 255)
    if (out_channels == 3) {
      StoreRgb8(g, g, g, out + 3 * i);
    } else {
      const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(g), _mm256_extracti128_si256(g, 1));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i), _mm_packus_epi16(w, w));
    }
  }
  return i;
}
#endif

RF_AUGMENT_CLONES void GrayKernel1(const uint8_t* __restrict in, uint8_t* __restrict out,
                                   size_t pixels) {
  for (size_t i = 0; i < pixels; ++i) out[i] = TruncU8(GrayF(in + 3 * i));
}

RF_AUGMENT_CLONES void GrayKernel3(const uint8_t* in, uint8_t* out, size_t pixels) {
  for (size_t i = 0; i < pixels; ++i) {
    const uint8_t g = TruncU8(GrayF(in + 3 * i));
    out[3 * i] = g;
    out[3 * i + 1] = g;
    out[3 * i + 2] = g;
  }
}

// One row of adjust_sharpness' interior: blur = round(ring / 13 + 5 mid / 13), out = x +
// alpha (blur - x) as ATen's fused add.
RF_AUGMENT_CLONES void SharpnessRow(const uint8_t* up, const uint8_t* mid, const uint8_t* down,
                                    size_t inner, size_t ch, float alpha, uint8_t* out) {
  const float a = static_cast<float>(1.0 / 13.0);
  const float b = static_cast<float>(5.0 / 13.0);
  for (size_t i = 0; i < inner; ++i) {
    const size_t l = i, m = i + ch, r = i + 2 * ch;
    const float ring = static_cast<float>(up[l]) + static_cast<float>(up[m]) +
                       static_cast<float>(up[r]) + static_cast<float>(mid[l]) +
                       static_cast<float>(mid[r]) + static_cast<float>(down[l]) +
                       static_cast<float>(down[m]) + static_cast<float>(down[r]);
    const float blur = std::nearbyint(ring * a + static_cast<float>(mid[m]) * b);
    const float xv = static_cast<float>(mid[m]);
    out[i] = TruncU8(std::fma(blur - xv, alpha, xv));
  }
}

#if defined(RF_AUGMENT_AVX2)
// 8 samples widened to 32-bit lanes.
__attribute__((target("avx2"))) inline __m256i Load8(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

// SharpnessRow, 8 samples at a time; returns how many it did (the rest: SharpnessRow). The
// ring of 8 neighbours is summed in integers (the float sum of the portable loop is exact, so
// the same value), then the same float operations in the same order: the same bits.
__attribute__((target("avx2,fma"))) size_t SharpnessRowAvx2(const uint8_t* up, const uint8_t* mid,
                                                            const uint8_t* down, size_t inner,
                                                            size_t ch, float alpha, uint8_t* out) {
  const __m256 a = _mm256_set1_ps(static_cast<float>(1.0 / 13.0));
  const __m256 b = _mm256_set1_ps(static_cast<float>(5.0 / 13.0));
  const __m256 va = _mm256_set1_ps(alpha);
  const __m256 lo = _mm256_setzero_ps();
  const __m256 hi = _mm256_set1_ps(255.0f);
  size_t i = 0;
  for (; i + 8 <= inner; i += 8) {
    const size_t l = i, m = i + ch, r = i + 2 * ch;
    __m256i ring = _mm256_add_epi32(Load8(up + l), Load8(up + m));
    ring = _mm256_add_epi32(ring, Load8(up + r));
    ring = _mm256_add_epi32(ring, Load8(mid + l));
    ring = _mm256_add_epi32(ring, Load8(mid + r));
    ring = _mm256_add_epi32(ring, Load8(down + l));
    ring = _mm256_add_epi32(ring, Load8(down + m));
    ring = _mm256_add_epi32(ring, Load8(down + r));
    const __m256 x = _mm256_cvtepi32_ps(Load8(mid + m));
    const __m256 sum =
        _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(ring), a), _mm256_mul_ps(x, b));
    const __m256 blur = _mm256_round_ps(sum, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 v = _mm256_fmadd_ps(_mm256_sub_ps(blur, x), va, x);
    v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
    const __m256i q = _mm256_cvttps_epi32(v);
    const __m128i w16 = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i), _mm_packus_epi16(w16, w16));
  }
  return i;
}
#endif

RF_AUGMENT_CLONES void MultiplyAdd(const float* p, float w, size_t n, float* acc) {
  for (size_t i = 0; i < n; ++i) acc[i] += w * p[i];
}

RF_AUGMENT_CLONES void RoundRow(const float* in, size_t n, uint8_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = RoundU8(in[i]);
}

RF_AUGMENT_CLONES void PosterizeKernel(const uint8_t* in, uint8_t* out, size_t n, uint8_t mask) {
  for (size_t i = 0; i < n; ++i) out[i] = in[i] & mask;
}

RF_AUGMENT_CLONES void SolarizeKernel(const uint8_t* in, uint8_t* out, size_t n, int threshold) {
  for (size_t i = 0; i < n; ++i) {
    const uint8_t x = in[i];
    out[i] = x >= threshold ? static_cast<uint8_t>(255 - x) : x;
  }
}

RF_AUGMENT_CLONES void InvertKernel(const uint8_t* in, uint8_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(255 - in[i]);
}

// 0, 1, ..., 255: run a per-sample kernel over it to get its lookup table.
constexpr std::array<uint8_t, 256> kIdentityTable = [] {
  std::array<uint8_t, 256> a{};
  for (int v = 0; v < 256; ++v) a[v] = static_cast<uint8_t>(v);
  return a;
}();

#if defined(RF_AUGMENT_AVX2)
// The hand-written AVX2 paths follow the image kernels' backend (SetKernelBackend), so that a
// test can compare them with the portable loops; "avx2" is only chosen on a CPU that has it.
bool UseAvx2() { return internal::ActiveKernels().name == std::string_view("avx2"); }

// out[i] = lut[in[i]] for 32 samples at a time: the table as 16 rows of 16 bytes, each looked
// up with vpshufb. Row k sees in - 16k; adding 0x70 with unsigned saturation leaves the low
// nibble and a clear top bit only for samples in row k, and vpshufb gives 0 for the others.
__attribute__((target("avx2"))) size_t ApplyLutAvx2(const uint8_t* in, uint8_t* out, size_t n,
                                                    const std::array<uint8_t, 256>& lut) {
  __m256i rows[16];
  for (int k = 0; k < 16; ++k) {
    rows[k] = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(lut.data() + 16 * k)));
  }
  const __m256i bias = _mm256_set1_epi8(0x70);
  const __m256i sixteen = _mm256_set1_epi8(16);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    __m256i acc = _mm256_setzero_si256();
    for (int k = 0; k < 16; ++k) {
      acc = _mm256_or_si256(acc, _mm256_shuffle_epi8(rows[k], _mm256_adds_epu8(v, bias)));
      v = _mm256_sub_epi8(v, sixteen);
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), acc);
  }
  return i;
}
// out[i] = TruncU8(fma(other, one_minus, in[i] * ratio)) (Blend) for 32 samples at a time, in
// float as the portable loop computes it: the same bits.
__attribute__((target("avx2,fma"))) size_t BlendConstAvx2(const uint8_t* in, uint8_t* out, size_t n,
                                                          float ratio, float one_minus,
                                                          float other) {
  const __m256 vr = _mm256_set1_ps(ratio), vo = _mm256_set1_ps(one_minus);
  const __m256 vc = _mm256_set1_ps(other);
  const __m256 lo = _mm256_setzero_ps(), hi = _mm256_set1_ps(255.0f);
  auto blend8 = [&](__m128i bytes8) __attribute__((target("avx2,fma"))) {
    const __m256 x = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes8));
    const __m256 v = _mm256_fmadd_ps(vc, vo, _mm256_mul_ps(x, vr));
    return _mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(v, lo), hi));
  };
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i + 16));
    const __m256i q0 = blend8(a), q1 = blend8(_mm_srli_si128(a, 8));
    const __m256i q2 = blend8(b), q3 = blend8(_mm_srli_si128(b, 8));
    // 32-bit lanes to bytes: the packs work per 128-bit lane, the permute restores the order.
    const __m256i w01 = _mm256_packus_epi32(q0, q1), w23 = _mm256_packus_epi32(q2, q3);
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(w01, w23),
                                                      _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), bytes);
  }
  return i;
}
#endif

// Each channel's smallest and largest sample over `pixels` interleaved pixels of ch channels,
// folded into *lo and *hi.
RF_AUGMENT_CLONES void ChannelMinMax(const uint8_t* in, size_t pixels, int ch,
                                     std::array<uint8_t, 4>* lo, std::array<uint8_t, 4>* hi) {
  for (size_t i = 0; i < pixels; ++i) {
    for (int c = 0; c < ch; ++c) {
      const uint8_t v = in[i * ch + c];
      (*lo)[c] = std::min((*lo)[c], v);
      (*hi)[c] = std::max((*hi)[c], v);
    }
  }
}

#if defined(RF_AUGMENT_AVX2)
// ChannelMinMax over whole runs of 32 pixels: ch registers of 32 bytes hold 32 pixels, and byte
// p of register k always belongs to channel (32 k + p) % ch, so a running byte min/max per
// register, folded by channel at the end, is each channel's. Returns the pixels covered.
__attribute__((target("avx2"))) size_t ChannelMinMaxAvx2(const uint8_t* in, size_t pixels, int ch,
                                                         std::array<uint8_t, 4>* lo,
                                                         std::array<uint8_t, 4>* hi) {
  __m256i low[4], high[4];  // std::array would drop __m256i's alignment attribute
  for (int k = 0; k < ch; ++k) {
    low[k] = _mm256_set1_epi8(-1);
    high[k] = _mm256_setzero_si256();
  }
  const size_t runs = pixels / 32;
  for (size_t r = 0; r < runs; ++r) {
    const uint8_t* p = in + r * 32 * static_cast<size_t>(ch);
    for (int k = 0; k < ch; ++k) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * k));
      low[k] = _mm256_min_epu8(low[k], v);
      high[k] = _mm256_max_epu8(high[k], v);
    }
  }
  if (runs == 0) return 0;
  alignas(32) std::array<uint8_t, 32> a, b;
  for (int k = 0; k < ch; ++k) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(a.data()), low[k]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(b.data()), high[k]);
    for (int p = 0; p < 32; ++p) {
      const int c = (32 * k + p) % ch;
      (*lo)[c] = std::min((*lo)[c], a[p]);
      (*hi)[c] = std::max((*hi)[c], b[p]);
    }
  }
  return runs * 32;
}
#endif

// out[i] = lut[in[i]].
void ApplyLut(const uint8_t* in, uint8_t* out, size_t n, const std::array<uint8_t, 256>& lut) {
  size_t i = 0;
#if defined(RF_AUGMENT_AVX2)
  const bool use_avx2 = UseAvx2();
  if (use_avx2) i = ApplyLutAvx2(in, out, n, lut);
#endif
  for (; i < n; ++i) out[i] = lut[in[i]];
}

void ApplyLuts(const uint8_t* in, uint8_t* out, size_t pixels, int ch,
               const std::array<std::array<uint8_t, 256>, 4>& lut) {
  if (ch == 3) {
    for (size_t i = 0; i < pixels; ++i) {
      out[3 * i] = lut[0][in[3 * i]];
      out[3 * i + 1] = lut[1][in[3 * i + 1]];
      out[3 * i + 2] = lut[2][in[3 * i + 2]];
    }
    return;
  }
  for (size_t i = 0; i < pixels; ++i) {
    for (int c = 0; c < ch; ++c) out[i * ch + c] = lut[c][in[i * ch + c]];
  }
}

// adjust_hue's per-pixel HSV round trip (torchvision's _rgb_to_hsv / _hsv_to_rgb in float32).
// In blocks of kHueBlock pixels: deinterleave to planes, a branch-free loop over the planes
// (selects instead of the sector switch, so that it vectorises 8 pixels wide on the v3 clone),
// interleave back. Same float operations in the same order as torchvision: the same bits.
constexpr size_t kHueBlock = 256;

RF_AUGMENT_CLONES void HuePlanes(float* __restrict r, float* __restrict g, float* __restrict b,
                                 float hue) {
  constexpr float kSixth = static_cast<float>(1.0 / 6.0);
  for (size_t i = 0; i < kHueBlock; ++i) {
    const float rr = r[i], gg = g[i], bb = b[i];
    const float maxc = std::max(std::max(rr, gg), bb);
    const float minc = std::min(std::min(rr, gg), bb);
    const bool eqc = maxc == minc;
    const float range = maxc - minc;
    const float s = range / (eqc ? 1.0f : maxc);
    const float div = eqc ? 1.0f : range;
    const float rc = (maxc - rr) / div;
    const float gc = (maxc - gg) / div;
    const float bc = (maxc - bb) / div;
    const bool max_is_r = maxc == rr;
    const bool max_is_g = maxc == gg;
    const float hr = max_is_r ? bc - gc : 0.0f;
    const float hg = (max_is_g & !max_is_r) ? (rc + 2.0f) - bc : 0.0f;
    const float hb = (!max_is_r & !max_is_g) ? (gc + 4.0f) - rc : 0.0f;
    // fmod(x, 1) for x in [5/6, 11/6]: x - 1 is exact there (Sterbenz).
    float h = (hr + hg + hb) * kSixth + 1.0f;
    h = h >= 1.0f ? h - 1.0f : h;
    // remainder_(1.0): Python's modulo, result in [0, 1].
    h = h + hue;
    h = h - std::floor(h);
    const float v = maxc;
    const float h6 = h * 6.0f;
    const float fi = std::floor(h6);
    const float f = h6 - fi;
    // fi is in [0, 6] (h6 may round up to 6): sector = fi mod 6.
    const float sector = fi >= 6.0f ? fi - 6.0f : fi;
    const float sxf = s * f;
    const float one_minus_s = 1.0f - s;
    const float q = std::min(std::max((1.0f - sxf) * v, 0.0f), 1.0f);
    const float t = std::min(std::max((sxf + one_minus_s) * v, 0.0f), 1.0f);
    const float p = std::min(std::max(one_minus_s * v, 0.0f), 1.0f);
    // Sectors 0..5: r = v q p p t v, g = t v v q p p, b = p p t v v q.
    const bool s0 = sector == 0.0f, s1 = sector == 1.0f, s2 = sector == 2.0f;
    const bool s3 = sector == 3.0f, s4 = sector == 4.0f;
    r[i] = s1 ? q : (s2 | s3) ? p : s4 ? t : v;
    g[i] = s0 ? t : (s1 | s2) ? v : s3 ? q : p;
    b[i] = (s0 | s1) ? p : s2 ? t : (s3 | s4) ? v : q;
  }
}

#if defined(RF_AUGMENT_AVX2)
// HuePlanes in AVX2 intrinsics (GCC does not if-convert the scalar loop): the same operations
// in the same order, selects as blends. max/min differ from std::max/min only on NaN and on
// the sign of a zero, neither of which reaches the output (inputs are x / 255, and a -0 or +0
// converts to the same 0).
__attribute__((target("avx2"))) void HuePlanesAvx2(float* __restrict r, float* __restrict g,
                                                   float* __restrict b, float hue) {
  const __m256 zero = _mm256_setzero_ps();
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 two = _mm256_set1_ps(2.0f);
  const __m256 four = _mm256_set1_ps(4.0f);
  const __m256 six = _mm256_set1_ps(6.0f);
  const __m256 sixth = _mm256_set1_ps(static_cast<float>(1.0 / 6.0));
  const __m256 vhue = _mm256_set1_ps(hue);
  for (size_t i = 0; i < kHueBlock; i += 8) {
    const __m256 rr = _mm256_load_ps(r + i), gg = _mm256_load_ps(g + i);
    const __m256 bb = _mm256_load_ps(b + i);
    const __m256 maxc = _mm256_max_ps(_mm256_max_ps(rr, gg), bb);
    const __m256 minc = _mm256_min_ps(_mm256_min_ps(rr, gg), bb);
    const __m256 eqc = _mm256_cmp_ps(maxc, minc, _CMP_EQ_OQ);
    const __m256 range = _mm256_sub_ps(maxc, minc);
    const __m256 s = _mm256_div_ps(range, _mm256_blendv_ps(maxc, one, eqc));
    const __m256 div = _mm256_blendv_ps(range, one, eqc);
    const __m256 rc = _mm256_div_ps(_mm256_sub_ps(maxc, rr), div);
    const __m256 gc = _mm256_div_ps(_mm256_sub_ps(maxc, gg), div);
    const __m256 bc = _mm256_div_ps(_mm256_sub_ps(maxc, bb), div);
    const __m256 max_is_r = _mm256_cmp_ps(maxc, rr, _CMP_EQ_OQ);
    const __m256 max_is_g = _mm256_cmp_ps(maxc, gg, _CMP_EQ_OQ);
    const __m256 hr = _mm256_and_ps(max_is_r, _mm256_sub_ps(bc, gc));
    const __m256 hg = _mm256_and_ps(_mm256_andnot_ps(max_is_r, max_is_g),
                                    _mm256_sub_ps(_mm256_add_ps(rc, two), bc));
    const __m256 hb = _mm256_andnot_ps(_mm256_or_ps(max_is_r, max_is_g),
                                       _mm256_sub_ps(_mm256_add_ps(gc, four), rc));
    __m256 h = _mm256_add_ps(_mm256_mul_ps(_mm256_add_ps(_mm256_add_ps(hr, hg), hb), sixth), one);
    h = _mm256_blendv_ps(h, _mm256_sub_ps(h, one), _mm256_cmp_ps(h, one, _CMP_GE_OQ));
    h = _mm256_add_ps(h, vhue);
    h = _mm256_sub_ps(h, _mm256_floor_ps(h));
    const __m256 v = maxc;
    const __m256 h6 = _mm256_mul_ps(h, six);
    const __m256 fi = _mm256_floor_ps(h6);
    const __m256 f = _mm256_sub_ps(h6, fi);
    const __m256 sector =
        _mm256_blendv_ps(fi, _mm256_sub_ps(fi, six), _mm256_cmp_ps(fi, six, _CMP_GE_OQ));
    const __m256 sxf = _mm256_mul_ps(s, f);
    const __m256 one_minus_s = _mm256_sub_ps(one, s);
    const __m256 q =
        _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_sub_ps(one, sxf), v), zero), one);
    const __m256 t =
        _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_add_ps(sxf, one_minus_s), v), zero), one);
    const __m256 p = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(one_minus_s, v), zero), one);
    const __m256 s0 = _mm256_cmp_ps(sector, zero, _CMP_EQ_OQ);
    const __m256 s1 = _mm256_cmp_ps(sector, one, _CMP_EQ_OQ);
    const __m256 s2 = _mm256_cmp_ps(sector, two, _CMP_EQ_OQ);
    const __m256 s3 = _mm256_cmp_ps(sector, _mm256_set1_ps(3.0f), _CMP_EQ_OQ);
    const __m256 s4 = _mm256_cmp_ps(sector, four, _CMP_EQ_OQ);
    // Sectors 0..5: r = v q p p t v, g = t v v q p p, b = p p t v v q.
    __m256 ro = _mm256_blendv_ps(v, t, s4);
    ro = _mm256_blendv_ps(ro, p, _mm256_or_ps(s2, s3));
    ro = _mm256_blendv_ps(ro, q, s1);
    __m256 go = _mm256_blendv_ps(p, q, s3);
    go = _mm256_blendv_ps(go, v, _mm256_or_ps(s1, s2));
    go = _mm256_blendv_ps(go, t, s0);
    __m256 bo = _mm256_blendv_ps(q, v, _mm256_or_ps(s3, s4));
    bo = _mm256_blendv_ps(bo, t, s2);
    bo = _mm256_blendv_ps(bo, p, _mm256_or_ps(s0, s1));
    _mm256_store_ps(r + i, ro);
    _mm256_store_ps(g + i, go);
    _mm256_store_ps(b + i, bo);
  }
}
#endif

RF_AUGMENT_CLONES void HueKernel(const uint8_t* in, uint8_t* o, size_t pixels, float hue) {
  constexpr float kInv255 = static_cast<float>(1.0 / 255.0);
  constexpr float kToU8 = 255.0f + 1.0f - 1e-3f;
  alignas(32) float r[kHueBlock], g[kHueBlock], b[kHueBlock];
#if defined(RF_AUGMENT_AVX2)
  const bool use_avx2 = UseAvx2();
#endif
  for (size_t start = 0; start < pixels; start += kHueBlock) {
    const size_t n = std::min(kHueBlock, pixels - start);
    const uint8_t* p = in + 3 * start;
    uint8_t* q = o + 3 * start;
    for (size_t i = 0; i < n; ++i) {
      r[i] = static_cast<float>(p[3 * i]) * kInv255;
      g[i] = static_cast<float>(p[3 * i + 1]) * kInv255;
      b[i] = static_cast<float>(p[3 * i + 2]) * kInv255;
    }
    for (size_t i = n; i < kHueBlock; ++i) r[i] = g[i] = b[i] = 0.0f;  // a short last block
#if defined(RF_AUGMENT_AVX2)
    if (use_avx2) {
      HuePlanesAvx2(r, g, b, hue);
    } else {
      HuePlanes(r, g, b, hue);
    }
#else
    HuePlanes(r, g, b, hue);
#endif
    for (size_t i = 0; i < n; ++i) {
      q[3 * i] = static_cast<uint8_t>(r[i] * kToU8);
      q[3 * i + 1] = static_cast<uint8_t>(g[i] * kToU8);
      q[3 * i + 2] = static_cast<uint8_t>(b[i] * kToU8);
    }
  }
}

// Source coordinates of one output row of an affine warp: grid_sample's unnormalised
// ((g + 1) W - 1) / 2 of g = bx t0 + (by t1) + t2, in torchvision's float32 order.
RF_AUGMENT_CLONES void AffineRowCoords(const float* __restrict bx, int width, float byt1,
                                       float byt4, float t0, float t2, float t3, float t5, float fw,
                                       float fh, float* __restrict ix, float* __restrict iy) {
  for (int x = 0; x < width; ++x) {
    const float gx = bx[x] * t0 + byt1 + t2;
    const float gy = bx[x] * t3 + byt4 + t5;
    ix[x] = ((gx + 1.0f) * fw - 1.0f) / 2.0f;
    iy[x] = ((gy + 1.0f) * fh - 1.0f) / 2.0f;
  }
}

RF_AUGMENT_CLONES void NearestRow(const float* ix, const float* iy, int width, int height,
                                  const Image& image, const uint8_t* fill, uint8_t* out) {
  const size_t ch = static_cast<size_t>(image.channels);
  const float fw = static_cast<float>(width), fh = static_cast<float>(height);
  const uint8_t* base = image.pixels.data();
  const size_t row = image.row_bytes();
  if (ch == 3) {
    for (int x = 0; x < width; ++x) {
      const float nx = std::nearbyint(ix[x]), ny = std::nearbyint(iy[x]);
      const bool inside = nx >= 0 && nx < fw && ny >= 0 && ny < fh;
      const uint8_t* s =
          inside ? base + static_cast<size_t>(ny) * row + static_cast<size_t>(nx) * 3 : fill;
      out[3 * x] = s[0];
      out[3 * x + 1] = s[1];
      out[3 * x + 2] = s[2];
    }
    return;
  }
  for (int x = 0; x < width; ++x) {
    const float nx = std::nearbyint(ix[x]), ny = std::nearbyint(iy[x]);
    const uint8_t* s = fill;
    if (nx >= 0 && nx < fw && ny >= 0 && ny < fh) {
      s = base + static_cast<size_t>(ny) * row + static_cast<size_t>(nx) * ch;
    }
    for (size_t k = 0; k < ch; ++k) out[x * ch + k] = s[k];
  }
}

}  // namespace

// ---- photometric ----------------------------------------------------------------------------

Result<Image> AdjustBrightness(Image image, double factor) {
  RF_RETURN_IF_ERROR(CheckImage(image, "adjust_brightness"));
  RF_RETURN_IF_ERROR(CheckFactor(factor, "adjust_brightness"));
  uint8_t* px = image.pixels.data();
  const float f = static_cast<float>(factor);
  // On AVX2 the float formula per sample (x * f is fma(0, 0, x * f)); else, as the output
  // depends on the sample value alone, a 256-entry table of it and one lookup per sample
  // (about half the time of the compiler's float loop).
  const size_t n = image.pixels.size();
  size_t done = 0;
#if defined(RF_AUGMENT_AVX2)
  if (UseAvx2()) done = BlendConstAvx2(px, px, n, f, 0.0f, 0.0f);
#endif
  std::array<uint8_t, 256> lut;
  BrightnessKernel(kIdentityTable.data(), lut.data(), 256, f);
  ApplyLut(px + done, px + done, n - done, lut);
  return image;
}

Result<Image> AdjustContrast(Image image, double factor) {
  RF_RETURN_IF_ERROR(CheckRgbOrGray(image, "adjust_contrast"));
  RF_RETURN_IF_ERROR(CheckFactor(factor, "adjust_contrast"));
  const size_t pixels = static_cast<size_t>(image.width) * static_cast<size_t>(image.height);
  uint8_t* px = image.pixels.data();
  const uint8_t* in = px;
  double sum = 0;
  if (image.channels == 3) {
    int64_t total = 0;
    size_t done = 0;
#if defined(RF_AUGMENT_AVX2)
    if (UseAvx2()) done = GraySumAvx2(in, pixels, &total);
#endif
    total += GraySum(in + 3 * done, pixels - done);
    sum = static_cast<double>(total);
  } else {
    for (size_t i = 0; i < pixels; ++i) sum += in[i];
  }
  const float mean = static_cast<float>(sum / static_cast<double>(pixels));
  const float ratio = static_cast<float>(factor);
  const float one_minus = static_cast<float>(1.0 - factor);
  // The blend computed per sample in float on AVX2 (fewer instructions than a table
  // lookup), else per sample value into a table, as adjust_brightness.
  size_t done = 0;
#if defined(RF_AUGMENT_AVX2)
  if (UseAvx2()) {
    done = BlendConstAvx2(px, px, image.pixels.size(), ratio, one_minus, mean);
  }
#endif
  std::array<uint8_t, 256> lut;
  ContrastKernel(kIdentityTable.data(), lut.data(), 256, ratio, one_minus, mean);
  ApplyLut(px + done, px + done, image.pixels.size() - done, lut);
  return image;
}

Result<Image> AdjustSaturation(Image image, double factor) {
  RF_RETURN_IF_ERROR(CheckRgbOrGray(image, "adjust_saturation"));
  RF_RETURN_IF_ERROR(CheckFactor(factor, "adjust_saturation"));
  if (image.channels == 1) return image;  // as torchvision (and PIL)
  const float ratio = static_cast<float>(factor);
  const float one_minus = static_cast<float>(1.0 - factor);
  const size_t pixels = static_cast<size_t>(image.width) * static_cast<size_t>(image.height);
  uint8_t* px = image.pixels.data();
  size_t done = 0;
#if defined(RF_AUGMENT_AVX2)
  if (UseAvx2()) done = SaturationAvx2(px, px, pixels, ratio, one_minus);
#endif
  SaturationKernel(px + 3 * done, px + 3 * done, pixels - done, ratio, one_minus);
  return image;
}

Result<Image> AdjustHue(Image image, double factor) {
  RF_RETURN_IF_ERROR(CheckRgbOrGray(image, "adjust_hue"));
  if (!(factor >= -0.5 && factor <= 0.5)) {
    return InvalidArgumentError("adjust_hue: hue_factor " + std::to_string(factor) +
                                " is not in [-0.5, 0.5]");
  }
  if (image.channels == 1) return image;
  const size_t pixels = static_cast<size_t>(image.width) * static_cast<size_t>(image.height);
  HueKernel(image.pixels.data(), image.pixels.data(), pixels, static_cast<float>(factor));
  return image;
}

Result<Image> RgbToGrayscale(Image image, int num_output_channels) {
  RF_RETURN_IF_ERROR(CheckRgbOrGray(image, "rgb_to_grayscale"));
  if (num_output_channels != 1 && num_output_channels != 3) {
    return InvalidArgumentError("rgb_to_grayscale: num_output_channels must be 1 or 3, got " +
                                std::to_string(num_output_channels));
  }
  const size_t pixels = static_cast<size_t>(image.width) * static_cast<size_t>(image.height);
  if (image.channels == 3 && num_output_channels == 3) {  // in place: one pixel at a time
    uint8_t* px = image.pixels.data();
    size_t done = 0;
#if defined(RF_AUGMENT_AVX2)
    if (UseAvx2()) done = GrayAvx2(px, px, pixels, 3);
#endif
    GrayKernel3(px + 3 * done, px + 3 * done, pixels - done);
    return image;
  }
  Image out;
  out.width = image.width;
  out.height = image.height;
  out.channels = num_output_channels;
  out.pixels.resize(pixels * static_cast<size_t>(num_output_channels));
  const uint8_t* in = image.pixels.data();
  uint8_t* o = out.pixels.data();
  if (image.channels == 3) {
    size_t done = 0;
#if defined(RF_AUGMENT_AVX2)
    if (UseAvx2()) done = GrayAvx2(in, o, pixels, 1);
#endif
    GrayKernel1(in + 3 * done, o + done, pixels - done);
    return out;
  }
  for (size_t i = 0; i < pixels; ++i) {
    for (int c = 0; c < num_output_channels; ++c) o[i * num_output_channels + c] = in[i];
  }
  return out;
}

Status PosterizeSamples(const uint8_t* in, uint8_t* out, size_t n, int bits) {
  if (bits < 0 || bits > 8) {
    return InvalidArgumentError("posterize: bits must be in [0, 8], got " + std::to_string(bits));
  }
  PosterizeKernel(in, out, n, static_cast<uint8_t>(((1u << bits) - 1u) << (8 - bits)));
  return Status::OK();
}

Status SolarizeSamples(const uint8_t* in, uint8_t* out, size_t n, double threshold) {
  if (!(threshold >= 0 && threshold <= 255)) {
    return InvalidArgumentError("solarize: threshold " + std::to_string(threshold) +
                                " is not in [0, 255]");
  }
  // x >= threshold (a real number) <=> x >= ceil(threshold) for integer x.
  SolarizeKernel(in, out, n, static_cast<int>(std::ceil(threshold)));
  return Status::OK();
}

void InvertSamples(const uint8_t* in, uint8_t* out, size_t n) { InvertKernel(in, out, n); }

Result<Image> Posterize(Image image, int bits) {
  RF_RETURN_IF_ERROR(CheckImage(image, "posterize"));
  RF_RETURN_IF_ERROR(
      PosterizeSamples(image.pixels.data(), image.pixels.data(), image.pixels.size(), bits));
  return image;
}

Result<Image> Solarize(Image image, double threshold) {
  RF_RETURN_IF_ERROR(CheckImage(image, "solarize"));
  RF_RETURN_IF_ERROR(
      SolarizeSamples(image.pixels.data(), image.pixels.data(), image.pixels.size(), threshold));
  return image;
}

Image Invert(Image image) {
  InvertKernel(image.pixels.data(), image.pixels.data(), image.pixels.size());
  return image;
}

Image AutoContrast(Image image) {
  const int ch = image.channels;
  if (image.pixels.empty()) return image;
  std::array<uint8_t, 4> lo = {255, 255, 255, 255};
  std::array<uint8_t, 4> hi = {0, 0, 0, 0};
  const size_t pixels = image.pixels.size() / static_cast<size_t>(ch);
  const uint8_t* in = image.pixels.data();
  size_t done = 0;
#if defined(RF_AUGMENT_AVX2)
  if (UseAvx2()) done = ChannelMinMaxAvx2(in, pixels, ch, &lo, &hi);
#endif
  ChannelMinMax(in + done * static_cast<size_t>(ch), pixels - done, ch, &lo, &hi);
  // A lookup table per channel of torchvision's float32 formula (x - min) / ((max - min) / 255).
  std::array<std::array<uint8_t, 256>, 4> lut;
  for (int c = 0; c < ch; ++c) {
    float minimum = lo[c];
    float inv_scale = (static_cast<float>(hi[c]) - minimum) * static_cast<float>(1.0 / 255.0);
    if (lo[c] == hi[c]) minimum = 0.0f, inv_scale = 1.0f;
    for (int v = 0; v < 256; ++v)
      lut[c][v] = TruncU8((static_cast<float>(v) - minimum) / inv_scale);
  }
  ApplyLuts(image.pixels.data(), image.pixels.data(), pixels, ch, lut);
  return image;
}

Image Equalize(Image image) {
  const int ch = image.channels;
  if (image.pixels.empty()) return image;
  const size_t pixels = image.pixels.size() / static_cast<size_t>(ch);
  // All channels' histograms in one pass, two tables per channel (even and odd pixels) so that
  // runs of one value do not serialise on a single counter.
  std::vector<std::array<uint32_t, 256>> part(static_cast<size_t>(2 * ch));
  const uint8_t* px = image.pixels.data();
  if (ch == 3) {
    size_t i = 0;
    for (; i + 2 <= pixels; i += 2) {
      const uint8_t* q = px + 3 * i;
      ++part[0][q[0]], ++part[1][q[1]], ++part[2][q[2]];
      ++part[3][q[3]], ++part[4][q[4]], ++part[5][q[5]];
    }
    for (; i < pixels; ++i)
      ++part[0][px[3 * i]], ++part[1][px[3 * i + 1]], ++part[2][px[3 * i + 2]];
  } else {
    for (size_t i = 0; i < pixels; ++i) {
      for (int c = 0; c < ch; ++c) ++part[c + ch * (i & 1)][px[i * ch + c]];
    }
  }
  std::array<std::array<uint8_t, 256>, 4> lut;
  for (int c = 0; c < ch; ++c) {
    std::array<int64_t, 256> hist{};
    for (int v = 0; v < 256; ++v) hist[v] = int64_t{part[c][v]} + part[c + ch][v];
    int last = 255;
    while (last > 0 && hist[last] == 0) --last;
    const int64_t step = (static_cast<int64_t>(pixels) - hist[last]) / 255;
    if (step == 0) {
      for (int v = 0; v < 256; ++v) lut[c][v] = static_cast<uint8_t>(v);
      continue;
    }
    int64_t acc = step / 2;
    for (int v = 0; v < 256; ++v) {
      lut[c][v] = static_cast<uint8_t>(std::min<int64_t>(acc / step, 255));
      acc += hist[v];
    }
  }
  ApplyLuts(image.pixels.data(), image.pixels.data(), pixels, ch, lut);
  return image;
}

Result<Image> AdjustSharpness(const Image& image, double factor) {
  RF_RETURN_IF_ERROR(CheckImage(image, "adjust_sharpness"));
  RF_RETURN_IF_ERROR(CheckFactor(factor, "adjust_sharpness"));
  if (image.width <= 2 || image.height <= 2) return image;
  Image out = image;
  const float alpha = static_cast<float>(1.0 - factor);
  const size_t ch = static_cast<size_t>(image.channels);
  const size_t inner = static_cast<size_t>(image.width - 2) * ch;
#if defined(RF_AUGMENT_AVX2)
  const bool use_avx2 = UseAvx2();
#endif
  for (int y = 1; y + 1 < image.height; ++y) {
    const uint8_t* up = image.row(y - 1);
    const uint8_t* mid = image.row(y);
    const uint8_t* down = image.row(y + 1);
    uint8_t* dst = out.row(y) + ch;
    size_t done = 0;
#if defined(RF_AUGMENT_AVX2)
    if (use_avx2) done = SharpnessRowAvx2(up, mid, down, inner, ch, alpha, dst);
#endif
    SharpnessRow(up + done, mid + done, down + done, inner - done, ch, alpha, dst + done);
  }
  return out;
}

Result<Image> GaussianBlur(const Image& image, std::array<int, 2> kernel_size,
                           std::array<double, 2> sigma) {
  RF_RETURN_IF_ERROR(CheckImage(image, "gaussian_blur"));
  for (int k : kernel_size) {
    if (k <= 0 || k % 2 == 0) {
      return InvalidArgumentError("gaussian_blur: kernel_size must be odd and positive, got " +
                                  std::to_string(k));
    }
  }
  for (double s : sigma) {
    if (!(s > 0) || !std::isfinite(s)) {
      return InvalidArgumentError("gaussian_blur: sigma must be positive, got " +
                                  std::to_string(s));
    }
  }
  // torchvision's kernel: softmax(-(x / sigma)^2) over x = linspace(-l, l, k), l = (k-1)/(2
  // sqrt 2), i.e. a Gaussian at (k-1)/2 * x / l, normalised.
  std::array<std::vector<float>, 2> kernels;
  for (int axis = 0; axis < 2; ++axis) {
    const int k = kernel_size[axis];
    const float lim = static_cast<float>((k - 1) / (2.0 * std::sqrt(2.0)));
    std::vector<float>& w = kernels[axis];
    w.resize(k);
    float sum = 0;
    for (int i = 0; i < k; ++i) {
      const float x = Linspace(-lim, lim, k, i) / static_cast<float>(sigma[axis]);
      w[i] = std::exp(-(x * x));
      sum += w[i];
    }
    for (float& v : w) v /= sum;
  }
  const int ch = image.channels;
  const int width = image.width, height = image.height;
  const int kx = kernel_size[0], ky = kernel_size[1];
  const int rx = kx / 2, ry = ky / 2;
  const size_t row_n = image.row_bytes();
  // Horizontal pass into a float image (each row copied once into a reflect-padded float row,
  // then one multiply-add sweep per tap over contiguous floats), then the vertical pass per
  // output row (one sweep per tap over whole rows).
  std::vector<float> horiz(row_n * static_cast<size_t>(height));
  std::vector<int> col(static_cast<size_t>(width + 2 * rx));
  for (int i = 0; i < width + 2 * rx; ++i) col[i] = Reflect(i - rx, width);
  std::vector<float> padded(static_cast<size_t>(width + 2 * rx) * ch);
  for (int y = 0; y < height; ++y) {
    const uint8_t* in = image.row(y);
    for (int i = 0; i < width + 2 * rx; ++i) {
      const uint8_t* s = in + static_cast<size_t>(col[i]) * ch;
      for (int c = 0; c < ch; ++c) padded[static_cast<size_t>(i) * ch + c] = s[c];
    }
    float* o = horiz.data() + static_cast<size_t>(y) * row_n;
    std::fill(o, o + row_n, 0.0f);
    for (int k = 0; k < kx; ++k) {
      const float w = kernels[0][k];
      const float* p = padded.data() + static_cast<size_t>(k) * ch;
      MultiplyAdd(p, w, row_n, o);
    }
  }
  Image out = SameShape(image);
  std::vector<float> acc(row_n);
  for (int y = 0; y < height; ++y) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int k = 0; k < ky; ++k) {
      const float w = kernels[1][k];
      const float* src = horiz.data() + static_cast<size_t>(Reflect(y - ry + k, height)) * row_n;
      MultiplyAdd(src, w, row_n, acc.data());
    }
    RoundRow(acc.data(), row_n, out.row(y));
  }
  return out;
}

Result<Image> Erase(Image image, const Rect& rect, std::span<const double> value) {
  RF_RETURN_IF_ERROR(CheckImage(image, "erase"));
  if (rect.x < 0 || rect.y < 0 || rect.width < 0 || rect.height < 0 ||
      rect.x + rect.width > image.width || rect.y + rect.height > image.height) {
    return InvalidArgumentError("erase: rectangle outside the " + std::to_string(image.width) +
                                "x" + std::to_string(image.height) + " image");
  }
  if (value.size() != 1 && value.size() != static_cast<size_t>(image.channels)) {
    return InvalidArgumentError("erase: value needs 1 or " + std::to_string(image.channels) +
                                " entries, got " + std::to_string(value.size()));
  }
  std::array<uint8_t, 4> v{};
  for (int c = 0; c < image.channels; ++c) {
    const double d = value.size() == 1 ? value[0] : value[c];
    v[c] = static_cast<uint8_t>(std::clamp(d, 0.0, 255.0));
  }
  const size_t ch = static_cast<size_t>(image.channels);
  // One row of the rectangle, then copied into each of its rows.
  std::vector<uint8_t> pattern(static_cast<size_t>(rect.width) * ch);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = v[i % ch];
  for (int y = rect.y; y < rect.y + rect.height && !pattern.empty(); ++y) {
    std::memcpy(image.row(y) + static_cast<size_t>(rect.x) * ch, pattern.data(), pattern.size());
  }
  return image;
}

// ---- affine -------------------------------------------------------------------------------------

Result<Image> Affine(const Image& image, const AffineOptions& options) {
  RF_RETURN_IF_ERROR(CheckImage(image, "affine"));
  const int ch = image.channels;
  if (!options.fill.empty() && options.fill.size() != 1 &&
      options.fill.size() != static_cast<size_t>(ch)) {
    return InvalidArgumentError("affine: fill needs 1 or " + std::to_string(ch) + " entries, got " +
                                std::to_string(options.fill.size()));
  }
  if (!(options.scale > 0)) {
    return InvalidArgumentError("affine: scale must be positive, got " +
                                std::to_string(options.scale));
  }
  const int width = image.width, height = image.height;
  // torchvision's _get_inverse_affine_matrix (in double, as Python computes it).
  double cx = 0, cy = 0;
  if (options.center) {
    cx = (*options.center)[0] - width * 0.5;
    cy = (*options.center)[1] - height * 0.5;
  }
  const double rot = options.angle * M_PI / 180.0;
  const double sx = options.shear[0] * M_PI / 180.0;
  const double sy = options.shear[1] * M_PI / 180.0;
  const double tx = options.translate[0], ty = options.translate[1];
  const double a = std::cos(rot - sy) / std::cos(sy);
  const double b = -std::cos(rot - sy) * std::tan(sx) / std::cos(sy) - std::sin(rot);
  const double c = std::sin(rot - sy) / std::cos(sy);
  const double d = -std::sin(rot - sy) * std::tan(sx) / std::cos(sy) + std::cos(rot);
  double m[6] = {d / options.scale,  -b / options.scale, 0.0,
                 -c / options.scale, a / options.scale,  0.0};
  m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
  m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
  m[2] += cx;
  m[5] += cy;
  // The sampling grid in float32 as torchvision builds it (theta float32, divided by half the
  // size, then grid_sample's unnormalisation with align_corners=False).
  const float hw = 0.5f * static_cast<float>(width), hh = 0.5f * static_cast<float>(height);
  const float t0 = static_cast<float>(m[0]) / hw, t1 = static_cast<float>(m[1]) / hw,
              t2 = static_cast<float>(m[2]) / hw;
  const float t3 = static_cast<float>(m[3]) / hh, t4 = static_cast<float>(m[4]) / hh,
              t5 = static_cast<float>(m[5]) / hh;
  const float fw = static_cast<float>(width), fh = static_cast<float>(height);
  std::array<float, 4> fill{};
  const bool has_fill = !options.fill.empty();
  for (int k = 0; k < ch && has_fill; ++k) {
    fill[k] = static_cast<float>(options.fill.size() == 1 ? options.fill[0] : options.fill[k]);
  }
  Image out = SameShape(image);
  const bool nearest = options.interpolation == AffineInterpolation::kNearest;
  std::array<uint8_t, 4> fill_u8{};
  for (int k = 0; k < ch; ++k) fill_u8[k] = RoundU8(fill[k]);
  const double tx_i = std::nearbyint(tx), ty_i = std::nearbyint(ty);
  if (nearest && options.angle == 0 && options.shear[0] == 0 && options.shear[1] == 0 &&
      options.scale == 1 && tx == tx_i && ty == ty_i && std::abs(tx) < 1e9 && std::abs(ty) < 1e9) {
    // An integer shift (the policies' TranslateX/Y): the grid hits pixel centres exactly, so
    // whole row segments are copied; the rest is fill.
    const int sx = static_cast<int>(tx_i), sy = static_cast<int>(ty_i);
    const size_t chs = static_cast<size_t>(ch);
    auto fill_columns = [&](uint8_t* o, int from, int to) {
      for (int x = from; x < to; ++x) {
        for (size_t k = 0; k < chs; ++k) o[x * chs + k] = fill_u8[k];
      }
    };
    const int x0 = std::clamp(sx, 0, width), x1 = std::clamp(width + sx, 0, width);
    for (int y = 0; y < height; ++y) {
      uint8_t* o = out.row(y);
      const int src_y = y - sy;
      if (src_y < 0 || src_y >= height || x0 >= x1) {
        fill_columns(o, 0, width);
        continue;
      }
      fill_columns(o, 0, x0);
      std::memcpy(o + x0 * chs, image.row(src_y) + static_cast<size_t>(x0 - sx) * chs,
                  static_cast<size_t>(x1 - x0) * chs);
      fill_columns(o, x1, width);
    }
    return out;
  }
  std::vector<float> bx(static_cast<size_t>(width)), ixs(bx.size()), iys(bx.size());
  for (int x = 0; x < width; ++x)
    bx[x] = Linspace((1.0f - fw) * 0.5f, (fw - 1.0f) * 0.5f, width, x);
  const double bx0 = (1.0 - static_cast<double>(fw)) * 0.5;
  for (int y = 0; y < height; ++y) {
    const float by = Linspace((1.0f - fh) * 0.5f, (fh - 1.0f) * 0.5f, height, y);
    uint8_t* o = out.row(y);
    // The same grid as AffineRowCoords, linear in x (bx steps by 1): stepped in fixed point by
    // the warp kernels. Their rounding differs from the float32 grid's only on ties.
    internal::WarpRow wr;
    wr.sx0 = ((bx0 * t0 + static_cast<double>(by * t1) + t2 + 1.0) * fw - 1.0) * 0.5;
    wr.sy0 = ((bx0 * t3 + static_cast<double>(by * t4) + t5 + 1.0) * fh - 1.0) * 0.5;
    wr.dx = static_cast<double>(t0) * fw * 0.5;
    wr.dy = static_cast<double>(t3) * fh * 0.5;
    const bool fixed = internal::WarpRowFits(wr, width);
    if (nearest && fixed) {
      internal::WarpNearestRow(image, wr, width, fill_u8.data(), o);
      continue;
    }
    AffineRowCoords(bx.data(), width, by * t1, by * t4, t0, t2, t3, t5, fw, fh, ixs.data(),
                    iys.data());
    if (nearest) {
      NearestRow(ixs.data(), iys.data(), width, height, image, fill_u8.data(), o);
      continue;
    }
    int lo = 0, hi = 0;  // [lo, hi): all four taps inside, done in fixed point
    if (fixed) internal::WarpBilinearInterior(image, wr, width, o, &lo, &hi);
    for (int x = 0; x < width; ++x) {
      if (x == lo && hi > lo) x = hi;
      if (x >= width) break;
      const float ix = ixs[x], iy = iys[x];
      uint8_t* px = o + static_cast<size_t>(x) * ch;
      const float x0f = std::floor(ix), y0f = std::floor(iy);
      const int x0 = static_cast<int>(x0f), y0 = static_cast<int>(y0f);
      const float fx = ix - x0f, fy = iy - y0f;
      const float wts[4] = {(1 - fx) * (1 - fy), fx * (1 - fy), (1 - fx) * fy, fx * fy};
      const int xs[4] = {x0, x0 + 1, x0, x0 + 1};
      const int ys[4] = {y0, y0, y0 + 1, y0 + 1};
      std::array<float, 4> acc{};
      float mask = 0;
      for (int q = 0; q < 4; ++q) {
        if (xs[q] < 0 || xs[q] >= width || ys[q] < 0 || ys[q] >= height) continue;
        const uint8_t* s = image.row(ys[q]) + static_cast<size_t>(xs[q]) * ch;
        for (int k = 0; k < ch; ++k) acc[k] += wts[q] * static_cast<float>(s[k]);
        mask += wts[q];
      }
      for (int k = 0; k < ch; ++k) {
        const float v = has_fill ? (acc[k] - fill[k]) * mask + fill[k] : acc[k];
        px[k] = RoundU8(v);
      }
    }
  }
  return out;
}

Result<Image> Rotate(const Image& image, double angle, AffineInterpolation interpolation,
                     std::span<const double> fill) {
  AffineOptions o;
  o.angle = -angle;  // rotate() is counter-clockwise; the inverse matrix takes the negation
  o.interpolation = interpolation;
  o.fill.assign(fill.begin(), fill.end());
  return Affine(image, o);
}

// ---- random transforms --------------------------------------------------------------------------

ColorJitterOptions ColorJitterOptions::FromScalars(double brightness, double contrast,
                                                   double saturation, double hue) {
  ColorJitterOptions o;
  auto factor_range = [](double v) -> std::optional<std::array<double, 2>> {
    if (v == 0) return std::nullopt;
    return std::array<double, 2>{std::max(0.0, 1.0 - v), 1.0 + v};
  };
  o.brightness = factor_range(brightness);
  o.contrast = factor_range(contrast);
  o.saturation = factor_range(saturation);
  if (hue != 0) o.hue = std::array<double, 2>{-hue, hue};
  return o;
}

Result<Image> ColorJitter(Image image, const ColorJitterOptions& options, Rng& rng) {
  const std::optional<std::array<double, 2>>* ranges[4] = {&options.brightness, &options.contrast,
                                                           &options.saturation, &options.hue};
  for (int i = 0; i < 4; ++i) {
    if (!*ranges[i]) continue;
    const auto& r = **ranges[i];
    const bool ok =
        i < 3 ? (r[0] >= 0 && r[0] <= r[1]) : (r[0] >= -0.5 && r[0] <= r[1] && r[1] <= 0.5);
    if (!ok) {
      static const char* kNames[4] = {"brightness", "contrast", "saturation", "hue"};
      return InvalidArgumentError(std::string("color_jitter: ") + kNames[i] + " range [" +
                                  std::to_string(r[0]) + ", " + std::to_string(r[1]) +
                                  "] is not valid (factors >= 0; hue within [-0.5, 0.5])");
    }
  }
  std::vector<int> order = {0, 1, 2, 3};
  Shuffle(&order, &rng);
  std::array<double, 4> factor{};
  for (int i = 0; i < 4; ++i) {
    if (*ranges[i]) factor[i] = rng.Uniform((**ranges[i])[0], (**ranges[i])[1]);
  }
  for (int i : order) {
    if (!*ranges[i]) continue;
    Result<Image> next = CancelledError("not run");
    switch (i) {
      case 0:
        next = AdjustBrightness(std::move(image), factor[0]);
        break;
      case 1:
        next = AdjustContrast(std::move(image), factor[1]);
        break;
      case 2:
        next = AdjustSaturation(std::move(image), factor[2]);
        break;
      default:
        next = AdjustHue(std::move(image), factor[3]);
        break;
    }
    RF_ASSIGN_OR_RETURN(image, std::move(next));
  }
  return image;
}

Result<Image> RandomGrayscale(Image image, double p, Rng& rng) {
  RF_RETURN_IF_ERROR(CheckRgbOrGray(image, "random_grayscale"));
  if (rng.Uniform(0, 1) >= p) return image;
  const int channels = image.channels;
  return RgbToGrayscale(std::move(image), channels);
}

Result<Image> RandomGaussianBlur(const Image& image, const GaussianBlurOptions& options, Rng& rng) {
  if (!(options.sigma[0] > 0 && options.sigma[0] <= options.sigma[1])) {
    return InvalidArgumentError("gaussian_blur: sigma range must satisfy 0 < min <= max");
  }
  const double s = rng.Uniform(options.sigma[0], options.sigma[1]);
  return GaussianBlur(image, options.kernel_size, {s, s});
}

Result<std::optional<Rect>> RandomErasingRect(int width, int height,
                                              const RandomErasingOptions& options, Rng& rng) {
  const auto& sc = options.scale;
  const auto& ra = options.ratio;
  if (!(sc[0] >= 0 && sc[0] <= sc[1] && sc[1] <= 1) || !(ra[0] > 0 && ra[0] <= ra[1]) ||
      !(options.p >= 0 && options.p <= 1)) {
    return InvalidArgumentError(
        "random_erasing: needs 0 <= p <= 1, 0 <= scale[0] <= scale[1] <= 1 and "
        "0 < ratio[0] <= ratio[1]");
  }
  if (rng.Uniform(0, 1) >= options.p) return std::optional<Rect>();
  const double area = static_cast<double>(width) * height;
  const double log_lo = std::log(ra[0]), log_hi = std::log(ra[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double erase_area = area * rng.Uniform(sc[0], sc[1]);
    const double aspect = std::exp(rng.Uniform(log_lo, log_hi));
    const int h = static_cast<int>(std::nearbyint(std::sqrt(erase_area * aspect)));
    const int w = static_cast<int>(std::nearbyint(std::sqrt(erase_area / aspect)));
    if (!(h < height && w < width)) continue;
    Rect r;
    r.height = h;
    r.width = w;
    r.y = static_cast<int>(rng.UniformInt(0, height - h + 1));
    r.x = static_cast<int>(rng.UniformInt(0, width - w + 1));
    return std::optional<Rect>(r);
  }
  return std::optional<Rect>();
}

Result<Image> RandomErasing(Image image, const RandomErasingOptions& options, Rng& rng) {
  RF_RETURN_IF_ERROR(CheckImage(image, "random_erasing"));
  RF_ASSIGN_OR_RETURN(std::optional<Rect> rect,
                      RandomErasingRect(image.width, image.height, options, rng));
  if (!rect) return image;
  if (options.random_mean.empty() && options.random_std.empty()) {
    return Erase(std::move(image), *rect, options.value);
  }
  const size_t ch = static_cast<size_t>(image.channels);
  if (options.random_mean.size() != options.random_std.size() ||
      (options.random_mean.size() != 1 && options.random_mean.size() != ch)) {
    return InvalidArgumentError("random_erasing: random fill needs 1 or " + std::to_string(ch) +
                                " means and as many stds");
  }
  constexpr double kTwoPi = 6.283185307179586;
  for (int y = rect->y; y < rect->y + rect->height; ++y) {
    uint8_t* o = image.row(y) + static_cast<size_t>(rect->x) * ch;
    for (size_t i = 0; i < static_cast<size_t>(rect->width) * ch; ++i) {
      const size_t c = options.random_mean.size() == 1 ? 0 : i % ch;
      // Box-Muller on two draws of the record's generator: N(0, 1), deterministic per seed.
      const double u1 = 1.0 - rng.Uniform(0, 1);  // (0, 1]: log is finite
      const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * rng.Uniform(0, 1));
      const double v = std::nearbyint(options.random_mean[c] + options.random_std[c] * z);
      o[i] = static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
    }
  }
  return image;
}

// ---- policies -----------------------------------------------------------------------------------

namespace {

constexpr std::string_view kOpNames[] = {"Identity",     "ShearX",    "ShearY",     "TranslateX",
                                         "TranslateY",   "Rotate",    "Brightness", "Color",
                                         "Contrast",     "Sharpness", "Posterize",  "Solarize",
                                         "AutoContrast", "Equalize",  "Invert"};

bool IsSigned(AugmentOp op) { return op >= AugmentOp::kShearX && op <= AugmentOp::kSharpness; }

enum class Space : uint8_t { kAutoAugment, kRandAugment, kTrivialWide };

// float(magnitudes[bin]) of torchvision's augmentation space (0 for ops without one).
double Magnitude(Space space, AugmentOp op, int bins, int bin, int width, int height) {
  const bool wide = space == Space::kTrivialWide;
  const float range = wide ? 0.99f : 0.9f;
  switch (op) {
    case AugmentOp::kShearX:
    case AugmentOp::kShearY:
      return Linspace(0.0f, wide ? 0.99f : 0.3f, bins, bin);
    case AugmentOp::kTranslateX:
      return Linspace(0.0f, wide ? 32.0f : static_cast<float>(150.0 / 331.0 * width), bins, bin);
    case AugmentOp::kTranslateY:
      return Linspace(0.0f, wide ? 32.0f : static_cast<float>(150.0 / 331.0 * height), bins, bin);
    case AugmentOp::kRotate:
      return Linspace(0.0f, wide ? 135.0f : 30.0f, bins, bin);
    case AugmentOp::kBrightness:
    case AugmentOp::kColor:
    case AugmentOp::kContrast:
    case AugmentOp::kSharpness:
      return Linspace(0.0f, range, bins, bin);
    case AugmentOp::kPosterize: {
      const float div = static_cast<float>((bins - 1) / (wide ? 6.0 : 4.0));
      return 8 - static_cast<int>(std::nearbyint(static_cast<float>(bin) / div));
    }
    case AugmentOp::kSolarize:
      return Linspace(1.0f, 0.0f, bins, bin);
    default:
      return 0.0;
  }
}

struct SubPolicyOp {
  AugmentOp op;
  double p;
  int bin;  // -1: no magnitude
};

using A = AugmentOp;
constexpr SubPolicyOp kImageNetPolicy[25][2] = {
    {{A::kPosterize, 0.4, 8}, {A::kRotate, 0.6, 9}},
    {{A::kSolarize, 0.6, 5}, {A::kAutoContrast, 0.6, -1}},
    {{A::kEqualize, 0.8, -1}, {A::kEqualize, 0.6, -1}},
    {{A::kPosterize, 0.6, 7}, {A::kPosterize, 0.6, 6}},
    {{A::kEqualize, 0.4, -1}, {A::kSolarize, 0.2, 4}},
    {{A::kEqualize, 0.4, -1}, {A::kRotate, 0.8, 8}},
    {{A::kSolarize, 0.6, 3}, {A::kEqualize, 0.6, -1}},
    {{A::kPosterize, 0.8, 5}, {A::kEqualize, 1.0, -1}},
    {{A::kRotate, 0.2, 3}, {A::kSolarize, 0.6, 8}},
    {{A::kEqualize, 0.6, -1}, {A::kPosterize, 0.4, 6}},
    {{A::kRotate, 0.8, 8}, {A::kColor, 0.4, 0}},
    {{A::kRotate, 0.4, 9}, {A::kEqualize, 0.6, -1}},
    {{A::kEqualize, 0.0, -1}, {A::kEqualize, 0.8, -1}},
    {{A::kInvert, 0.6, -1}, {A::kEqualize, 1.0, -1}},
    {{A::kColor, 0.6, 4}, {A::kContrast, 1.0, 8}},
    {{A::kRotate, 0.8, 8}, {A::kColor, 1.0, 2}},
    {{A::kColor, 0.8, 8}, {A::kSolarize, 0.8, 7}},
    {{A::kSharpness, 0.4, 7}, {A::kInvert, 0.6, -1}},
    {{A::kShearX, 0.6, 5}, {A::kEqualize, 1.0, -1}},
    {{A::kColor, 0.4, 0}, {A::kEqualize, 0.6, -1}},
    {{A::kEqualize, 0.4, -1}, {A::kSolarize, 0.2, 4}},
    {{A::kSolarize, 0.6, 5}, {A::kAutoContrast, 0.6, -1}},
    {{A::kInvert, 0.6, -1}, {A::kEqualize, 1.0, -1}},
    {{A::kColor, 0.6, 4}, {A::kContrast, 1.0, 8}},
    {{A::kEqualize, 0.8, -1}, {A::kEqualize, 0.6, -1}},
};

// RandAugment's and TrivialAugmentWide's space, in torchvision's key order.
constexpr AugmentOp kWideSpace[] = {A::kIdentity,     A::kShearX,    A::kShearY,     A::kTranslateX,
                                    A::kTranslateY,   A::kRotate,    A::kBrightness, A::kColor,
                                    A::kContrast,     A::kSharpness, A::kPosterize,  A::kSolarize,
                                    A::kAutoContrast, A::kEqualize};

bool HasMagnitude(AugmentOp op) {
  return op != A::kIdentity && op != A::kAutoContrast && op != A::kEqualize && op != A::kInvert;
}

double SignedDraw(AugmentOp op, double magnitude, Rng& rng) {
  if (IsSigned(op) && rng.Uniform(0, 1) <= 0.5) return -magnitude;
  return magnitude;
}

Result<Image> ApplyAll(Image image, const std::vector<AppliedOp>& ops,
                       const PolicyOptions& options) {
  for (const AppliedOp& op : ops) {
    RF_ASSIGN_OR_RETURN(image, ApplyAugmentOp(std::move(image), op, options));
  }
  return image;
}

}  // namespace

std::string_view AugmentOpName(AugmentOp op) { return kOpNames[static_cast<int>(op)]; }

Result<AugmentOp> ParseAugmentOp(std::string_view name) {
  for (size_t i = 0; i < std::size(kOpNames); ++i) {
    if (kOpNames[i] == name) return static_cast<AugmentOp>(i);
  }
  return InvalidArgumentError("unknown augmentation op \"" + std::string(name) +
                              "\" (Identity, ShearX, ShearY, TranslateX, TranslateY, Rotate, "
                              "Brightness, Color, Contrast, Sharpness, Posterize, Solarize, "
                              "AutoContrast, Equalize, Invert)");
}

Result<Image> ApplyAugmentOp(Image image, const AppliedOp& op, const PolicyOptions& options) {
  const double m = op.magnitude;
  AffineOptions affine;
  affine.interpolation = options.interpolation;
  affine.fill = options.fill;
  switch (op.op) {
    case A::kIdentity:
      return image;
    case A::kShearX:
    case A::kShearY: {
      const double deg = std::atan(m) * 180.0 / M_PI;
      affine.shear =
          op.op == A::kShearX ? std::array<double, 2>{deg, 0.0} : std::array<double, 2>{0.0, deg};
      affine.center = std::array<double, 2>{0.0, 0.0};
      return Affine(image, affine);
    }
    case A::kTranslateX:
    case A::kTranslateY: {
      const double t = std::trunc(m);
      affine.translate =
          op.op == A::kTranslateX ? std::array<double, 2>{t, 0.0} : std::array<double, 2>{0.0, t};
      return Affine(image, affine);
    }
    case A::kRotate:
      return Rotate(image, m, options.interpolation, options.fill);
    case A::kBrightness:
      return AdjustBrightness(std::move(image), 1.0 + m);
    case A::kColor:
      return AdjustSaturation(std::move(image), 1.0 + m);
    case A::kContrast:
      return AdjustContrast(std::move(image), 1.0 + m);
    case A::kSharpness:
      return AdjustSharpness(image, 1.0 + m);
    case A::kPosterize:
      return Posterize(std::move(image), static_cast<int>(m));
    case A::kSolarize:
      return Solarize(std::move(image), 255.0 * m);
    case A::kAutoContrast:
      RF_RETURN_IF_ERROR(CheckImage(image, "autocontrast"));
      return AutoContrast(std::move(image));
    case A::kEqualize:
      RF_RETURN_IF_ERROR(CheckImage(image, "equalize"));
      return Equalize(std::move(image));
    case A::kInvert:
      RF_RETURN_IF_ERROR(CheckImage(image, "invert"));
      return Invert(std::move(image));
  }
  return InvalidArgumentError("unknown augmentation op");
}

Result<std::vector<AppliedOp>> SampleAutoAugment(int width, int height, Rng& rng) {
  std::vector<AppliedOp> ops;
  const auto& policy = kImageNetPolicy[rng.UniformInt(0, std::size(kImageNetPolicy))];
  for (const SubPolicyOp& s : policy) {
    if (!(rng.Uniform(0, 1) <= s.p)) continue;
    double m = 0;
    if (HasMagnitude(s.op)) {
      m = SignedDraw(s.op, Magnitude(Space::kAutoAugment, s.op, 10, s.bin, width, height), rng);
    }
    ops.push_back({s.op, m});
  }
  return ops;
}

Result<std::vector<AppliedOp>> SampleRandAugment(int width, int height,
                                                 const RandAugmentOptions& options, Rng& rng) {
  if (options.num_ops < 0 || options.num_magnitude_bins < 2 || options.magnitude < 0 ||
      options.magnitude >= options.num_magnitude_bins) {
    return InvalidArgumentError(
        "rand_augment: needs num_ops >= 0, num_magnitude_bins >= 2 and 0 <= magnitude < "
        "num_magnitude_bins");
  }
  std::vector<AppliedOp> ops;
  for (int i = 0; i < options.num_ops; ++i) {
    const AugmentOp op = kWideSpace[rng.UniformInt(0, std::size(kWideSpace))];
    double m = 0;
    if (HasMagnitude(op)) {
      m = SignedDraw(op,
                     Magnitude(Space::kRandAugment, op, options.num_magnitude_bins,
                               options.magnitude, width, height),
                     rng);
    }
    ops.push_back({op, m});
  }
  return ops;
}

Result<std::vector<AppliedOp>> SampleTrivialAugmentWide(int width, int height,
                                                        const TrivialAugmentWideOptions& options,
                                                        Rng& rng) {
  if (options.num_magnitude_bins < 2) {
    return InvalidArgumentError("trivial_augment_wide: num_magnitude_bins must be >= 2");
  }
  const AugmentOp op = kWideSpace[rng.UniformInt(0, std::size(kWideSpace))];
  double m = 0;
  if (HasMagnitude(op)) {
    const int bin = static_cast<int>(rng.UniformInt(0, options.num_magnitude_bins));
    m = SignedDraw(
        op, Magnitude(Space::kTrivialWide, op, options.num_magnitude_bins, bin, width, height),
        rng);
  }
  return std::vector<AppliedOp>{{op, m}};
}

Result<Image> AutoAugment(Image image, const PolicyOptions& options, Rng& rng) {
  RF_RETURN_IF_ERROR(CheckImage(image, "auto_augment"));
  RF_ASSIGN_OR_RETURN(auto ops, SampleAutoAugment(image.width, image.height, rng));
  return ApplyAll(std::move(image), ops, options);
}

Result<Image> RandAugment(Image image, const RandAugmentOptions& rand_options,
                          const PolicyOptions& options, Rng& rng) {
  RF_RETURN_IF_ERROR(CheckImage(image, "rand_augment"));
  RF_ASSIGN_OR_RETURN(auto ops, SampleRandAugment(image.width, image.height, rand_options, rng));
  return ApplyAll(std::move(image), ops, options);
}

Result<Image> TrivialAugmentWide(Image image, const TrivialAugmentWideOptions& ta_options,
                                 const PolicyOptions& options, Rng& rng) {
  RF_RETURN_IF_ERROR(CheckImage(image, "trivial_augment_wide"));
  RF_ASSIGN_OR_RETURN(auto ops,
                      SampleTrivialAugmentWide(image.width, image.height, ta_options, rng));
  return ApplyAll(std::move(image), ops, options);
}

// ---- batch ops ----------------------------------------------------------------------------------

namespace {

double StandardNormal(Rng& rng) {
  // Box-Muller; 1 - u keeps the logarithm's argument in (0, 1].
  const double u = 1.0 - rng.Uniform(0, 1);
  const double v = rng.Uniform(0, 1);
  return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * M_PI * v);
}

// Gamma(shape, 1) by Marsaglia and Tsang (shape < 1 boosted by u^(1 / shape)).
double SampleGamma(double shape, Rng& rng) {
  if (shape < 1) {
    const double u = 1.0 - rng.Uniform(0, 1);
    return SampleGamma(shape + 1.0, rng) * std::pow(u, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x, v;
    do {
      x = StandardNormal(rng);
      v = 1.0 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = 1.0 - rng.Uniform(0, 1);
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

Status CheckBatch(const BatchView& batch, std::span<const int64_t> labels, int num_classes,
                  std::span<float> soft_labels, const char* op) {
  if (batch.batch <= 0 || batch.height <= 0 || batch.width <= 0 || batch.channels <= 0 ||
      (batch.u8 == nullptr) == (batch.f32 == nullptr)) {
    return InvalidArgumentError(std::string(op) +
                                ": expected a non-empty [B, H, W, C] uint8 or float32 batch");
  }
  if (num_classes <= 0) {
    return InvalidArgumentError(std::string(op) + ": num_classes must be positive");
  }
  if (labels.size() != static_cast<size_t>(batch.batch)) {
    return InvalidArgumentError(std::string(op) + ": " + std::to_string(labels.size()) +
                                " labels for a batch of " + std::to_string(batch.batch));
  }
  if (soft_labels.size() != static_cast<size_t>(batch.batch) * static_cast<size_t>(num_classes)) {
    return InvalidArgumentError(std::string(op) + ": soft_labels must hold B * num_classes values");
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= num_classes) {
      return InvalidArgumentError(
          std::string(op) + ": label " + std::to_string(labels[i]) + " of batch element " +
          std::to_string(i) + " is not in [0, num_classes=" + std::to_string(num_classes) + ")");
    }
  }
  return Status::OK();
}

// soft[i] = lam * onehot(label[i]) + (1 - lam) * onehot(label[i - 1]).
void MixLabels(std::span<const int64_t> labels, int num_classes, double lam,
               std::span<float> soft) {
  const size_t b = labels.size();
  std::fill(soft.begin(), soft.end(), 0.0f);
  for (size_t i = 0; i < b; ++i) {
    const size_t prev = (i + b - 1) % b;
    float* row = soft.data() + i * static_cast<size_t>(num_classes);
    row[labels[i]] += static_cast<float>(lam);
    row[labels[prev]] += static_cast<float>(1.0 - lam);
  }
}

}  // namespace

double SampleBeta(double alpha, Rng& rng) {
  const double x = SampleGamma(alpha, rng);
  const double y = SampleGamma(alpha, rng);
  return x + y > 0 ? x / (x + y) : 0.5;
}

Status MixUpWithLambda(const BatchView& batch, std::span<const int64_t> labels, int num_classes,
                       double lambda, std::span<float> soft_labels) {
  RF_RETURN_IF_ERROR(CheckBatch(batch, labels, num_classes, soft_labels, "mixup"));
  const size_t per = static_cast<size_t>(batch.height) * static_cast<size_t>(batch.width) *
                     static_cast<size_t>(batch.channels);
  const size_t b = static_cast<size_t>(batch.batch);
  const float lam = static_cast<float>(lambda);
  const float rest = static_cast<float>(1.0 - lambda);
  // x_i = lam x_i + (1 - lam) x_{i-1}, every x_{i-1} the original: from a separate source in
  // one pass; in place, keep the last one aside and go from the back.
  if (batch.source != nullptr) {
    for (size_t i = 0; i < b; ++i) {
      const size_t j = i == 0 ? b - 1 : i - 1;
      if (batch.f32 != nullptr) {
        const float* src = static_cast<const float*>(batch.source);
        const float* x = src + i * per;
        const float* prev = src + j * per;
        float* out = batch.f32 + i * per;
        for (size_t k = 0; k < per; ++k) out[k] = prev[k] * rest + x[k] * lam;
      } else {
        const uint8_t* src = static_cast<const uint8_t*>(batch.source);
        const uint8_t* x = src + i * per;
        const uint8_t* prev = src + j * per;
        uint8_t* out = batch.u8 + i * per;
        for (size_t k = 0; k < per; ++k) {
          out[k] = RoundU8(static_cast<float>(prev[k]) * rest + static_cast<float>(x[k]) * lam);
        }
      }
    }
  } else if (batch.f32 != nullptr) {
    std::vector<float> last(batch.f32 + (b - 1) * per, batch.f32 + b * per);
    for (size_t i = b; i-- > 0;) {
      float* x = batch.f32 + i * per;
      const float* prev = i == 0 ? last.data() : batch.f32 + (i - 1) * per;
      for (size_t k = 0; k < per; ++k) x[k] = prev[k] * rest + x[k] * lam;
    }
  } else {
    std::vector<uint8_t> last(batch.u8 + (b - 1) * per, batch.u8 + b * per);
    for (size_t i = b; i-- > 0;) {
      uint8_t* x = batch.u8 + i * per;
      const uint8_t* prev = i == 0 ? last.data() : batch.u8 + (i - 1) * per;
      for (size_t k = 0; k < per; ++k) {
        x[k] = RoundU8(static_cast<float>(prev[k]) * rest + static_cast<float>(x[k]) * lam);
      }
    }
  }
  MixLabels(labels, num_classes, lambda, soft_labels);
  return Status::OK();
}

Rect CutMixBox(int width, int height, double lambda, Rng& rng) {
  const int rx = static_cast<int>(rng.UniformInt(0, width));
  const int ry = static_cast<int>(rng.UniformInt(0, height));
  const double r = 0.5 * std::sqrt(1.0 - lambda);
  const int half_w = static_cast<int>(r * width);
  const int half_h = static_cast<int>(r * height);
  const int x1 = std::max(rx - half_w, 0), y1 = std::max(ry - half_h, 0);
  const int x2 = std::min(rx + half_w, width), y2 = std::min(ry + half_h, height);
  return Rect{x1, y1, x2 - x1, y2 - y1};
}

Status CutMixWithBox(const BatchView& batch, std::span<const int64_t> labels, int num_classes,
                     const Rect& box, std::span<float> soft_labels) {
  RF_RETURN_IF_ERROR(CheckBatch(batch, labels, num_classes, soft_labels, "cutmix"));
  if (box.x < 0 || box.y < 0 || box.width < 0 || box.height < 0 ||
      box.x + box.width > batch.width || box.y + box.height > batch.height) {
    return InvalidArgumentError("cutmix: box outside the image");
  }
  const size_t elem = batch.f32 != nullptr ? sizeof(float) : 1;
  auto* base = batch.f32 != nullptr ? reinterpret_cast<uint8_t*>(batch.f32) : batch.u8;
  const size_t row = static_cast<size_t>(batch.width) * batch.channels * elem;
  const size_t per = row * static_cast<size_t>(batch.height);
  const size_t b = static_cast<size_t>(batch.batch);
  const size_t off = static_cast<size_t>(box.x) * batch.channels * elem;
  const size_t len = static_cast<size_t>(box.width) * batch.channels * elem;
  if (batch.source != nullptr) {  // each element copied, then its box from the one before
    const auto* src = static_cast<const uint8_t*>(batch.source);
    for (size_t i = 0; i < b; ++i) {
      const size_t j = i == 0 ? b - 1 : i - 1;
      std::memcpy(base + i * per, src + i * per, per);
      for (int y = 0; y < box.height; ++y) {
        const size_t at = (box.y + y) * row + off;
        std::memcpy(base + i * per + at, src + j * per + at, len);
      }
    }
  } else {
    // Element 0 reads element b-1's box, which is overwritten first (going from the back):
    // save it.
    std::vector<uint8_t> last(static_cast<size_t>(box.height) * len);
    for (int y = 0; y < box.height; ++y) {
      std::memcpy(last.data() + y * len, base + (b - 1) * per + (box.y + y) * row + off, len);
    }
    for (size_t i = b; i-- > 0;) {
      for (int y = 0; y < box.height; ++y) {
        uint8_t* dst = base + i * per + (box.y + y) * row + off;
        const uint8_t* src =
            i == 0 ? last.data() + y * len : base + (i - 1) * per + (box.y + y) * row + off;
        std::memcpy(dst, src, len);
      }
    }
  }
  const double lam = 1.0 - static_cast<double>(box.width) * box.height /
                               (static_cast<double>(batch.width) * batch.height);
  MixLabels(labels, num_classes, lam, soft_labels);
  return Status::OK();
}

Result<double> MixUp(const BatchView& batch, std::span<const int64_t> labels, int num_classes,
                     double alpha, std::span<float> soft_labels, Rng& rng) {
  if (!(alpha > 0)) return InvalidArgumentError("mixup: alpha must be positive");
  const double lam = SampleBeta(alpha, rng);
  RF_RETURN_IF_ERROR(MixUpWithLambda(batch, labels, num_classes, lam, soft_labels));
  return lam;
}

Result<double> CutMix(const BatchView& batch, std::span<const int64_t> labels, int num_classes,
                      double alpha, std::span<float> soft_labels, Rng& rng) {
  if (!(alpha > 0)) return InvalidArgumentError("cutmix: alpha must be positive");
  const double lam = SampleBeta(alpha, rng);
  const Rect box = CutMixBox(batch.width, batch.height, lam, rng);
  RF_RETURN_IF_ERROR(CutMixWithBox(batch, labels, num_classes, box, soft_labels));
  return 1.0 - static_cast<double>(box.width) * box.height /
                   (static_cast<double>(batch.width) * batch.height);
}

}  // namespace recordflow::image
