// Pixel kernels of the image ops, one table per backend. The bodies are written once
// (kernels_body.inc) and compiled three times: scalar (vectorisation off: the reference),
// SSE2 and AVX2+FMA (auto-vectorised). FP contraction is off for all three, and no
// reduction is reordered, so every backend gives the same bits.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "recordflow/image/ops.h"

namespace recordflow::image::internal {

struct Kernels {
  const char* name;
  // acc[i] = sum over k of weights[k] * rows[k][i], i in [0, n), summed in k order.
  void (*vertical_u8)(const uint8_t* const* rows, const float* weights, int taps, size_t n,
                      float* acc);
  // out[x * C + c] = sum over k < taps of weights[x * taps + k] * in[(start[x] + k) * C + c].
  // `in` must stay readable one float past the last value read (the SIMD backends load four
  // floats per RGB pixel).
  void (*horizontal)(const float* in, int channels, const int32_t* start, const float* weights,
                     int taps, int out_w, float* out);
  // The fixed-point resample of the non-negative filters (bilinear, area, nearest). Weights are
  // Q14 (kQOne = 2^14 is 1.0), non-negative, each output's summing to kQOne. The vertical pass
  // gives Q7 values (kQMidShift fractional bits):
  //   mid[i] = (sum over k of weights[k] * rows[k][i] + 2^(kQMidShift - 1)) >> kQMidShift.
  // The horizontal pass: out[x * C + c] = float(sum over k < taps of w(x, k) * in[(start[x] + k)
  // * C + c]) * mul[c] + add[c] (C == 3; other C: * kQOutUnit), where w(x, k) is the 16-bit half
  // k % 2 (0: low) of pairs[(k / 2) * out_w + x]. mul = kQOutUnit and add = 0 give the plain
  // values; mul = kQOutUnit * scale and add = bias give NormalizeRow's float32 bits for
  // (value * scale + bias), as kQOutUnit is a power of two. `in` must stay readable (zeros) for
  // 8 values past the last pixel a tap touches: the pairs round taps up to even and the SIMD
  // loads read past a pair's two pixels.
  void (*vertical_u8_q)(const uint8_t* const* rows, const int16_t* weights, int taps, size_t n,
                        int16_t* mid);
  //
  // prepare_horizontal_q fills `plan` for one set of horizontal taps (once per resample, not per
  // row), or leaves it empty; horizontal_q then takes plan->data(), or nullptr when empty. Only
  // the AVX2 backend plans, for C == 3 (the plan's first byte is its HorizontalQPlanKind): on a
  // CPU with AVX-512 BW and VBMI (and Avx512Allowed), when every group of 8 outputs reads
  // within 64 consecutive values, it gathers each group's tap pairs with two byte permutes of a
  // 128-byte window (kAvx512); else it lays each 4 outputs' weight pairs out as the 256-bit
  // pass multiplies them, so no row permutes them again (kAvx2). With a plan, `in` must stay
  // readable for kHorizontalQPad values past the last pixel a tap touches (without one, 8
  // suffice).
  void (*prepare_horizontal_q)(const int32_t* start, const int32_t* pairs, int taps, int out_w,
                               int channels, std::vector<uint8_t>* plan);
  void (*horizontal_q)(const int16_t* in, int channels, const int32_t* start, const int32_t* pairs,
                       const uint8_t* plan, int taps, int out_w, const float* mul, const float* add,
                       float* out);
  // One row of `width` RGB float pixels -> `type`: v * scale[c] + bias[c] (uint8: rounded and
  // clamped v). HWC: out points at the row's first value. CHW: out points at the row in plane 0;
  // planes are plane_stride values apart. flip: columns reversed.
  void (*normalize_row)(const float* in, int width, const float* scale, const float* bias,
                        bool flip, TensorType type, Layout layout, size_t plane_stride, void* out);
};

enum class HorizontalQPlanKind : uint8_t { kNone = 0, kAvx512 = 1, kAvx2 = 2 };
inline HorizontalQPlanKind PlanKind(const std::vector<uint8_t>& plan) {
  return plan.empty() ? HorizontalQPlanKind::kNone : static_cast<HorizontalQPlanKind>(plan[0]);
}

inline constexpr int kQOne = 1 << 14;
inline constexpr int kQMidShift = 7;
inline constexpr float kQOutUnit = 1.0f / static_cast<float>(1 << (14 + kQMidShift));
inline constexpr size_t kHorizontalQPad = 72;

const Kernels& ScalarKernels();
const Kernels& Sse2Kernels();
const Kernels& Avx2Kernels();  // only when the CPU has AVX2 and FMA
bool CpuHasAvx2();
// The AVX2 backend's AVX-512 horizontal pass: the CPU has AVX-512 F, BW and VBMI, and tests have
// not turned it off (SetAvx512Allowed(false) exercises the AVX2 path on such a CPU).
bool Avx512Usable();
void SetAvx512Allowed(bool allowed);

// The backend in use (SetKernelBackend).
const Kernels& ActiveKernels();

// float -> IEEE half / bfloat16, round to nearest even (NaN stays NaN).
inline uint16_t FloatToHalfBits(float f) {
  uint32_t x;
  __builtin_memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7FFFFFFFu;
  if (x >= 0x477FF000u) {  // >= 65520: rounds to inf (or is inf / NaN)
    return static_cast<uint16_t>(sign | (x > 0x7F800000u ? 0x7E00u : 0x7C00u));
  }
  if (x < 0x38800000u) {  // below 2^-14: a subnormal half; let the FPU round it
    float a;
    __builtin_memcpy(&a, &x, 4);
    a += 0.5f;
    uint32_t b;
    __builtin_memcpy(&b, &a, 4);
    return static_cast<uint16_t>(sign | (b - 0x3F000000u));
  }
  const uint32_t odd = (x >> 13) & 1u;
  x += 0xC8000FFFu + odd;  // rebias exponent (-112 << 23) and round
  return static_cast<uint16_t>(sign | (x >> 13));
}

inline uint16_t FloatToBFloat16Bits(float f) {
  uint32_t x;
  __builtin_memcpy(&x, &f, 4);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace recordflow::image::internal
