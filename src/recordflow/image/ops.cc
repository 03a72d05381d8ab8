// Resampling, crop, flip, normalize, random-resized-crop sampling and kernel dispatch.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>

#include "kernels_internal.h"
#include "recordflow/core/enum_names.h"
#include "recordflow/image/ops.h"

namespace recordflow::image {
namespace internal {

bool CpuHasAvx2() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

namespace {
std::atomic<bool> g_avx512_allowed{true};
}  // namespace

bool Avx512Usable() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vbmi");
  }();
  return has && g_avx512_allowed.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

void SetAvx512Allowed(bool allowed) { g_avx512_allowed.store(allowed, std::memory_order_relaxed); }

namespace {
const Kernels* BestKernels() {
#if defined(__x86_64__) || defined(__i386__)
  if (CpuHasAvx2()) return &Avx2Kernels();
  return &Sse2Kernels();
#else
  return &ScalarKernels();
#endif
}
std::atomic<const Kernels*> g_kernels{nullptr};
}  // namespace

const Kernels& ActiveKernels() {
  const Kernels* k = g_kernels.load(std::memory_order_acquire);
  if (k == nullptr) {
    k = BestKernels();
    g_kernels.store(k, std::memory_order_release);
  }
  return *k;
}

}  // namespace internal

std::string_view KernelBackendName() { return internal::ActiveKernels().name; }

Status SetKernelBackend(KernelBackend backend) {
  const internal::Kernels* k = nullptr;
  switch (backend) {
    case KernelBackend::kAuto:
      k = internal::BestKernels();
      break;
    case KernelBackend::kScalar:
      k = &internal::ScalarKernels();
      break;
#if defined(__x86_64__) || defined(__i386__)
    case KernelBackend::kSse2:
      k = &internal::Sse2Kernels();
      break;
    case KernelBackend::kAvx2:
      if (!internal::CpuHasAvx2()) return UnimplementedError("this CPU lacks AVX2/FMA");
      k = &internal::Avx2Kernels();
      break;
#else
    default:
      return UnimplementedError("SIMD backends are x86 only");
#endif
  }
  internal::g_kernels.store(k, std::memory_order_release);
  return Status::OK();
}

// ---- resampling ------------------------------------------------------------------------------

namespace {

// Filter taps for one axis: output i reads taps inputs from start[i] with weights[i * taps + k].
struct Taps {
  int taps = 0;
  std::vector<int32_t> start;
  std::vector<float> weights;
  int lo = 0, hi = 0;  // inputs [lo, hi) are read at all
};

// Keys' cubic convolution kernel with parameter a (Pillow and torch's antialiased path use
// -0.5, torch's plain bicubic -0.75); zero from |x| = 2 on.
double Cubic(double x, double a) {
  x = std::abs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

bool IsCubic(Interpolation mode) {
  return mode == Interpolation::kBicubic || mode == Interpolation::kBicubicNoAntialias;
}

// The filters whose weights are never negative resample on the fixed-point kernels
// (kernels_internal.h); the cubic's negative lobes stay on the float ones.
bool UsesFixedPoint(Interpolation mode) { return !IsCubic(mode); }

// static_cast<int>(std::floor(x)) and (std::ceil(x)) for |x| < 2^31, inline: the libm calls
// were a fifth of the taps' cost (two per output).
inline int FloorToInt(double x) {
  const int i = static_cast<int>(x);  // truncates toward zero
  return i - (static_cast<double>(i) > x ? 1 : 0);
}
inline int CeilToInt(double x) {
  const int i = static_cast<int>(x);
  return i + (static_cast<double>(i) < x ? 1 : 0);
}

void ComputeTaps(int in_size, double box_lo, double box_len, int out_size, Interpolation mode,
                 Taps* t, std::vector<double>* scratch) {
  const double scale = box_len / out_size;
  t->start.resize(out_size);
  thread_local std::vector<int32_t> first, count, skip;
  first.resize(out_size);
  count.resize(out_size);
  skip.resize(out_size);
  std::vector<double>& w = *scratch;
  int max_taps = 1;
  // Pass 1: per output, the weights as doubles, trimmed of zeros at both ends.
  // The filter's scale: widened by the shrink factor (antialiased) or not; its support in
  // inputs is its radius (1 linear, 2 cubic) times that.
  const bool triangle =
      mode == Interpolation::kBilinear || mode == Interpolation::kBilinearNoAntialias;
  const double fscale = mode == Interpolation::kBilinearNoAntialias ? 1.0 : std::max(scale, 1.0);
  const double support = triangle ? fscale : mode == Interpolation::kBicubic ? 2.0 * fscale : 0.0;
  // Multiplies by these in the per-tap loop (a division per tap was a tenth of a resample).
  const double inv_support = support > 0 ? 1.0 / support : 0.0;
  const double inv_fscale = 1.0 / fscale;
  const int stride = static_cast<int>(std::ceil(2 * support + std::max(scale, 1.0))) + 3;
  // Not cleared: every weight read below is written first (only the cubic's taps accumulate).
  w.resize(static_cast<size_t>(out_size) * stride);
  for (int i = 0; i < out_size; ++i) {
    double* wi = &w[static_cast<size_t>(i) * stride];
    int lo = 0, n = 0;
    if (mode == Interpolation::kNearest) {
      lo = std::clamp(FloorToInt(box_lo + (i + 0.5) * scale), 0, in_size - 1);
      wi[0] = 1.0;
      n = 1;
    } else if (mode == Interpolation::kArea) {
      const double a = box_lo + i * scale, b = a + scale;
      lo = std::clamp(FloorToInt(a), 0, in_size - 1);
      const int hi = std::clamp(CeilToInt(b), lo + 1, in_size);
      double total = 0;
      for (int j = lo; j < hi && j - lo < stride; ++j) {
        const double v = std::max(0.0, std::min(b, j + 1.0) - std::max(a, static_cast<double>(j)));
        wi[j - lo] = v;
        total += v;
        n = j - lo + 1;
      }
      if (total <= 0) wi[0] = 1.0, n = 1, total = 1.0;
      for (int k = 0; k < n; ++k) wi[k] /= total;
    } else if (mode == Interpolation::kBicubicNoAntialias) {
      // torch's upsample_bicubic2d (align_corners=False): taps floor(src) - 1 .. + 2 around the
      // unclamped source coordinate, those past an edge folded onto the edge pixel.
      const double src = box_lo + (i + 0.5) * scale - 0.5;
      const double fl = std::floor(src);
      const double frac = src - fl;
      const int x0 = static_cast<int>(fl) - 1;
      lo = std::clamp(x0, 0, in_size - 1);
      n = std::clamp(x0 + 3, 0, in_size - 1) + 1 - lo;
      std::fill(wi, wi + n, 0.0);
      for (int k = 0; k < 4; ++k) {
        wi[std::clamp(x0 + k, 0, in_size - 1) - lo] += Cubic(frac + 1.0 - k, -0.75);
      }
    } else {
      const double center = box_lo + (i + 0.5) * scale;
      lo = std::max(0, FloorToInt(center - support));
      const int hi = std::min(in_size, CeilToInt(center + support) + 1);
      double total = 0;
      for (int j = lo; j < hi && j - lo < stride; ++j) {
        double v = 0.0;
        if (triangle) {
          const double tv = std::abs((j + 0.5 - center) * inv_support);
          v = tv < 1.0 ? 1.0 - tv : 0.0;
        } else {
          v = Cubic((j + 0.5 - center) * inv_fscale, -0.5);
        }
        wi[j - lo] = v;
        total += v;
        n = j - lo + 1;
      }
      if (total <= 0) {  // cannot happen for a box inside the image; be safe
        lo = std::clamp(static_cast<int>(center), 0, in_size - 1);
        wi[0] = 1.0, n = 1, total = 1.0;
      }
      const double inv_total = 1.0 / total;
      for (int k = 0; k < n; ++k) wi[k] *= inv_total;
    }
    // Trim zero weights.
    int b = 0, e = n;
    while (b < e - 1 && wi[b] == 0.0) ++b;
    while (e > b + 1 && wi[e - 1] == 0.0) --e;
    first[i] = lo + b;
    count[i] = e - b;
    skip[i] = b;  // the weights start b doubles into wi
    max_taps = std::max(max_taps, e - b);
  }
  // Pass 2: fixed tap count (zero-padded), starts shifted left where the padding would run past
  // the input's end.
  t->taps = max_taps;
  t->weights.assign(static_cast<size_t>(out_size) * max_taps, 0.0f);
  t->lo = in_size;
  t->hi = 0;
  for (int i = 0; i < out_size; ++i) {
    int s = first[i];
    int shift = 0;
    if (s + max_taps > in_size) shift = s + max_taps - in_size;
    if (shift > s) shift = s;  // max_taps > in_size cannot happen: taps come from the input
    t->start[i] = s - shift;
    const double* wi = &w[static_cast<size_t>(i) * stride + skip[i]];
    for (int k = 0; k < count[i]; ++k) {
      t->weights[static_cast<size_t>(i) * max_taps + shift + k] = static_cast<float>(wi[k]);
    }
    t->lo = std::min(t->lo, t->start[i]);
    t->hi = std::max(t->hi, t->start[i] + max_taps);
  }
  t->hi = std::min(t->hi, in_size);
}

// Q14 weights of `t` (kernels_internal.h): each output's rounded, the rounding's remainder
// added to its largest weight so that they sum to kQOne. For the non-negative filters only
// (not the cubic's: UsesFixedPoint).
void QuantizeTaps(const Taps& t, int out_size, std::vector<int16_t>* q) {
  const size_t taps = static_cast<size_t>(t.taps);
  q->resize(static_cast<size_t>(out_size) * taps);
  for (size_t i = 0; i < static_cast<size_t>(out_size); ++i) {
    const float* w = &t.weights[i * taps];
    int16_t* o = &(*q)[i * taps];
    int sum = 0;
    size_t largest = 0;
    for (size_t k = 0; k < taps; ++k) {
      // Rounded to nearest, ties to even, as lrint (which is a libm call here): below 2^22, adding
      // and subtracting 2^23 in float leaves the rounded value.
      const float v = std::max(w[k], 0.0f) * internal::kQOne;
      o[k] = static_cast<int16_t>((v + 8388608.0f) - 8388608.0f);
      sum += o[k];
      if (w[k] > w[largest]) largest = k;
    }
    o[largest] = static_cast<int16_t>(o[largest] + internal::kQOne - sum);
  }
}

struct ResampleScratch {
  Taps h, v;
  std::vector<double> w;
  std::vector<int16_t> vq, hq, mid_q;  // the fixed-point path's weights and vertical output
  std::vector<int32_t> hpairs;
  std::vector<uint8_t> hplan;  // HorizontalQ's plan (kernels_internal.h)
  std::vector<float> acc;
  std::vector<const uint8_t*> rows;
  std::vector<uint8_t> mid;  // the cubic's horizontally resampled rows, uint8
  std::vector<float> mid_f;  // one of them before rounding
};

}  // namespace

Interpolation WithAntialias(Interpolation interpolation, bool antialias) {
  if (antialias) return interpolation;
  if (interpolation == Interpolation::kBilinear) return Interpolation::kBilinearNoAntialias;
  if (interpolation == Interpolation::kBicubic) return Interpolation::kBicubicNoAntialias;
  return interpolation;
}

namespace {

constexpr EnumName<Interpolation> kInterpolationNames[] = {
    {Interpolation::kBilinear, "bilinear"},
    {Interpolation::kBicubic, "bicubic"},
    {Interpolation::kArea, "area"},
    {Interpolation::kNearest, "nearest"},
};

// Either case of each name.
constexpr EnumName<Layout> kLayoutNames[] = {
    {Layout::kHWC, "HWC"},
    {Layout::kCHW, "CHW"},
    {Layout::kHWC, "hwc"},
    {Layout::kCHW, "chw"},
};

}  // namespace

Result<Interpolation> ParseInterpolation(std::string_view name) {
  if (std::optional<Interpolation> value = FindByName(kInterpolationNames, name)) return *value;
  return InvalidArgumentError("interpolation must be " + NameList(kInterpolationNames, "\"") +
                              ", not \"" + std::string(name) + "\"");
}

namespace {

// The resample of ResampleToFloat, one output row at a time: row y's floats go to row_out(y),
// then row_done(y, row) runs while the row is still in cache. With `affine` (3 channels and
// UsesFixedPoint only), each value v of channel c is written as v * affine[0][c] +
// affine[1][c], NormalizeRow's float32 bits.
template <typename RowOut, typename RowDone>
Status ResampleRows(const Image& image, const Box& box, int out_w, int out_h,
                    Interpolation interpolation, bool flip, RowOut row_out, RowDone row_done,
                    const float (*affine)[3] = nullptr) {
  if (image.width <= 0 || image.height <= 0 || image.channels < 1 || image.channels > 4 ||
      image.pixels.size() < image.row_bytes() * image.height) {
    return InvalidArgumentError("resample: empty or inconsistent image");
  }
  if (out_w <= 0 || out_h <= 0) {
    return InvalidArgumentError("resample: output size must be positive (got " +
                                std::to_string(out_w) + "x" + std::to_string(out_h) + ")");
  }
  const double eps = 1e-6;
  if (!(box.width > 0 && box.height > 0 && box.x >= -eps && box.y >= -eps &&
        box.x + box.width <= image.width + eps && box.y + box.height <= image.height + eps)) {
    return InvalidArgumentError(
        "resample: the source box x=" + std::to_string(box.x) + " y=" + std::to_string(box.y) +
        " width=" + std::to_string(box.width) + " height=" + std::to_string(box.height) +
        " is empty or outside the " + std::to_string(image.width) + "x" +
        std::to_string(image.height) + " image");
  }
  thread_local ResampleScratch s;
  const internal::Kernels& k = internal::ActiveKernels();
  const int C = image.channels;
  ComputeTaps(image.width, box.x, box.width, out_w, interpolation, &s.h, &s.w);
  ComputeTaps(image.height, box.y, box.height, out_h, interpolation, &s.v, &s.w);
  // Vertical first: it vectorises over whole rows; the horizontal pass then runs on out_h rows
  // only, over the columns [h.lo, h.hi) that it reads.
  const size_t cols = static_cast<size_t>(s.h.hi - s.h.lo) * C;
  s.rows.resize(s.v.taps);
  for (int32_t& st : s.h.start) st -= s.h.lo;
  if (flip) {
    // Output column x takes the taps of column out_w - 1 - x: the same sums, stored mirrored.
    const size_t t = static_cast<size_t>(s.h.taps);
    for (int a = 0, b = out_w - 1; a < b; ++a, --b) {
      std::swap(s.h.start[a], s.h.start[b]);
      std::swap_ranges(s.h.weights.begin() + a * t, s.h.weights.begin() + (a + 1) * t,
                       s.h.weights.begin() + b * t);
    }
  }
  if (IsCubic(interpolation)) {
    // Pillow and torchvision's uint8 kernels run the cubic horizontally first and round the
    // intermediate to uint8 (clamping its overshoot) before the vertical pass; the clamp shows
    // at strong edges, so this order is kept here, with the same kernels as below.
    const size_t out_cols = static_cast<size_t>(out_w) * C;
    s.acc.resize(cols + 1);  // + 1: the horizontal kernel's 4-float loads (kernels_internal.h)
    s.mid.resize(static_cast<size_t>(s.v.hi - s.v.lo) * out_cols);
    s.mid_f.resize(out_cols);
    const float one = 1.0f;
    for (int r = s.v.lo; r < s.v.hi; ++r) {
      const uint8_t* src = image.row(r) + static_cast<size_t>(s.h.lo) * C;
      k.vertical_u8(&src, &one, 1, cols, s.acc.data());  // uint8 -> float
      k.horizontal(s.acc.data(), C, s.h.start.data(), s.h.weights.data(), s.h.taps, out_w,
                   s.mid_f.data());
      uint8_t* m = &s.mid[static_cast<size_t>(r - s.v.lo) * out_cols];
      for (size_t i = 0; i < out_cols; ++i) {
        m[i] = static_cast<uint8_t>(std::clamp(std::nearbyint(s.mid_f[i]), 0.0f, 255.0f));
      }
    }
    for (int y = 0; y < out_h; ++y) {
      for (int t = 0; t < s.v.taps; ++t) {
        s.rows[t] = &s.mid[static_cast<size_t>(s.v.start[y] + t - s.v.lo) * out_cols];
      }
      float* row = row_out(y);
      k.vertical_u8(s.rows.data(), &s.v.weights[static_cast<size_t>(y) * s.v.taps], s.v.taps,
                    out_cols, row);
      for (size_t i = 0; i < out_cols; ++i) {
        row[i] = std::clamp(std::nearbyint(row[i]), 0.0f, 255.0f);
      }
      row_done(y, row);
    }
    return Status::OK();
  }
  // Bilinear, area, nearest (UsesFixedPoint): the fixed-point kernels, weights as Q14, the
  // vertical pass's output as Q7 int16.
  QuantizeTaps(s.v, out_h, &s.vq);
  QuantizeTaps(s.h, out_w, &s.hq);
  float mul[3], add[3];
  for (int c = 0; c < 3; ++c) {
    mul[c] = affine ? affine[0][c] * internal::kQOutUnit : internal::kQOutUnit;
    add[c] = affine ? affine[1][c] : 0.0f;
  }
  const int ht = s.h.taps, npairs = (ht + 1) / 2;
  s.hpairs.resize(static_cast<size_t>(npairs) * out_w);
  for (int x = 0; x < out_w; ++x) {
    const int16_t* w = &s.hq[static_cast<size_t>(x) * ht];
    for (int j = 0; j < npairs; ++j) {
      const uint32_t lo = static_cast<uint16_t>(w[2 * j]);
      const uint32_t hi = 2 * j + 1 < ht ? static_cast<uint16_t>(w[2 * j + 1]) : 0u;
      s.hpairs[static_cast<size_t>(j) * out_w + x] = static_cast<int32_t>(lo | hi << 16);
    }
  }
  k.prepare_horizontal_q(s.h.start.data(), s.hpairs.data(), ht, out_w, C, &s.hplan);
  const uint8_t* plan = s.hplan.empty() ? nullptr : s.hplan.data();
  // Padding for the horizontal kernel's reads past the last tap (kernels_internal.h).
  const size_t pad = 2 * static_cast<size_t>(C) + internal::kHorizontalQPad;
  s.mid_q.resize(cols + pad);
  std::fill(s.mid_q.begin() + static_cast<ptrdiff_t>(cols), s.mid_q.end(), int16_t{0});
  for (int y = 0; y < out_h; ++y) {
    for (int t = 0; t < s.v.taps; ++t) {
      s.rows[t] = image.row(s.v.start[y] + t) + static_cast<size_t>(s.h.lo) * C;
    }
    k.vertical_u8_q(s.rows.data(), &s.vq[static_cast<size_t>(y) * s.v.taps], s.v.taps, cols,
                    s.mid_q.data());
    float* row = row_out(y);
    k.horizontal_q(s.mid_q.data(), C, s.h.start.data(), s.hpairs.data(), plan, ht, out_w, mul, add,
                   row);
    row_done(y, row);
  }
  return Status::OK();
}

// NormalizeInto's per-channel multiply and add: (v / 255 - mean) / std == v * scale + bias.
Status NormalizeParams(const NormalizeOptions& o, float scale[3], float bias[3]) {
  for (int c = 0; c < 3; ++c) {
    if (!(o.std[c] > 0)) return InvalidArgumentError("normalize: std must be positive");
    scale[c] = static_cast<float>(1.0 / (255.0 * o.std[c]));
    bias[c] = static_cast<float>(-static_cast<double>(o.mean[c]) / o.std[c]);
  }
  return Status::OK();
}

}  // namespace

Status ResampleToFloat(const Image& image, const Box& box, int out_w, int out_h,
                       Interpolation interpolation, std::vector<float>* out, bool flip) {
  if (out_w > 0 && out_h > 0) {
    out->resize(static_cast<size_t>(out_w) * out_h * std::max(1, image.channels));
  }
  const size_t row_values = static_cast<size_t>(std::max(out_w, 0)) * std::max(1, image.channels);
  return ResampleRows(
      image, box, out_w, out_h, interpolation, flip,
      [&](int y) { return out->data() + static_cast<size_t>(y) * row_values; },
      [](int, const float*) {});
}

Status ResampleNormalizeInto(const Image& image, const Box& box, int out_w, int out_h,
                             Interpolation interpolation, const NormalizeOptions& o,
                             std::span<std::byte> out) {
  if (image.channels != 3) {
    return InvalidArgumentError("resample+normalize: the image must have 3 channels, not " +
                                std::to_string(image.channels));
  }
  if (out_w <= 0 || out_h <= 0 ||
      out.size() != static_cast<size_t>(out_w) * out_h * 3 * DTypeSize(o.type)) {
    return InvalidArgumentError("resample+normalize: the output buffer does not hold " +
                                std::to_string(out_w) + "x" + std::to_string(out_h) + "x3");
  }
  float scale[3], bias[3];
  RF_RETURN_IF_ERROR(NormalizeParams(o, scale, bias));
  if (UsesFixedPoint(interpolation) && o.type == TensorType::kFloat32 && o.layout == Layout::kHWC) {
    // The normalize runs in the horizontal kernel, straight into `out`.
    const float affine[2][3] = {{scale[0], scale[1], scale[2]}, {bias[0], bias[1], bias[2]}};
    float* dst = reinterpret_cast<float*>(out.data());
    return ResampleRows(
        image, box, out_w, out_h, interpolation, o.flip,
        [&](int y) { return dst + static_cast<size_t>(y) * out_w * 3; }, [](int, const float*) {},
        affine);
  }
  const internal::Kernels& k = internal::ActiveKernels();
  const size_t es = DTypeSize(o.type);
  const size_t plane = static_cast<size_t>(out_w) * out_h;
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(out_w) * 3);
  return ResampleRows(
      image, box, out_w, out_h, interpolation, o.flip, [&](int) { return row.data(); },
      [&](int y, const float* values) {
        const size_t offset = o.layout == Layout::kHWC ? static_cast<size_t>(y) * out_w * 3
                                                       : static_cast<size_t>(y) * out_w;
        k.normalize_row(values, out_w, scale, bias, /*flip=*/false, o.type, o.layout, plane,
                        out.data() + offset * es);
      });
}

Result<Image> Resample(const Image& image, int out_w, int out_h, Interpolation interpolation,
                       const Box* box) {
  Box whole{0, 0, static_cast<double>(image.width), static_cast<double>(image.height)};
  std::vector<float> f;
  RF_RETURN_IF_ERROR(ResampleToFloat(image, box ? *box : whole, out_w, out_h, interpolation, &f));
  Image out;
  out.width = out_w;
  out.height = out_h;
  out.channels = image.channels;
  out.pixels.resize(f.size());
  for (size_t i = 0; i < f.size(); ++i) {
    const float v = std::clamp(f[i] + 0.5f, 0.0f, 255.0f);
    out.pixels[i] = static_cast<uint8_t>(static_cast<int>(v));
  }
  return out;
}

Result<Image> CenterCrop(const Image& image, int width, int height) {
  if (width <= 0 || height <= 0 || width > image.width || height > image.height) {
    return InvalidArgumentError("center_crop: " + std::to_string(width) + "x" +
                                std::to_string(height) + " does not fit in the " +
                                std::to_string(image.width) + "x" + std::to_string(image.height) +
                                " image");
  }
  const int x0 = static_cast<int>(std::nearbyint((image.width - width) / 2.0));
  const int y0 = static_cast<int>(std::nearbyint((image.height - height) / 2.0));
  Image out;
  out.width = width;
  out.height = height;
  out.channels = image.channels;
  out.pixels.resize(out.row_bytes() * height);
  for (int y = 0; y < height; ++y) {
    std::memcpy(out.row(y), image.row(y0 + y) + static_cast<size_t>(x0) * image.channels,
                out.row_bytes());
  }
  return out;
}

Image FlipLeftRight(const Image& image) {
  Image out;
  out.width = image.width;
  out.height = image.height;
  out.channels = image.channels;
  out.pixels.resize(image.pixels.size());
  const int C = image.channels;
  for (int y = 0; y < image.height; ++y) {
    const uint8_t* src = image.row(y);
    uint8_t* dst = out.row(y);
    for (int x = 0; x < image.width; ++x) {
      std::memcpy(dst + static_cast<size_t>(x) * C,
                  src + static_cast<size_t>(image.width - 1 - x) * C, C);
    }
  }
  return out;
}

// ---- normalize -------------------------------------------------------------------------------

bool IsTensorType(TensorType type) {
  return type == TensorType::kUint8 || type == TensorType::kFloat16 ||
         type == TensorType::kBFloat16 || type == TensorType::kFloat32;
}

Result<TensorType> ParseTensorType(std::string_view name) {
  Result<TensorType> type = ParseAnyDType(name);
  if (!type.ok() || !IsTensorType(*type) || name != DTypeName(*type)) {
    return InvalidArgumentError("dtype must be float32, float16, bfloat16 or uint8, not \"" +
                                std::string(name) + "\"");
  }
  return type;
}

Result<Layout> ParseLayout(std::string_view name) {
  if (std::optional<Layout> layout = FindByName(kLayoutNames, name)) return *layout;
  return InvalidArgumentError("layout must be " + NameList(kLayoutNames, "\"") + ", not \"" +
                              std::string(name) + "\"");
}

Status NormalizeInto(std::span<const float> pixels, int width, int height,
                     const NormalizeOptions& o, std::span<std::byte> out) {
  const size_t n = static_cast<size_t>(width) * height * 3;
  if (width <= 0 || height <= 0 || pixels.size() != n || out.size() != n * DTypeSize(o.type)) {
    return InvalidArgumentError("normalize: buffer sizes do not match " + std::to_string(width) +
                                "x" + std::to_string(height) + "x3");
  }
  float scale[3], bias[3];
  RF_RETURN_IF_ERROR(NormalizeParams(o, scale, bias));
  const internal::Kernels& k = internal::ActiveKernels();
  const size_t es = DTypeSize(o.type);
  const size_t plane = static_cast<size_t>(width) * height;
  for (int y = 0; y < height; ++y) {
    const size_t offset = o.layout == Layout::kHWC ? static_cast<size_t>(y) * width * 3
                                                   : static_cast<size_t>(y) * width;
    k.normalize_row(pixels.data() + static_cast<size_t>(y) * width * 3, width, scale, bias, o.flip,
                    o.type, o.layout, plane, out.data() + offset * es);
  }
  return Status::OK();
}

// ---- random resized crop -------------------------------------------------------------------

uint64_t ElementSeed(uint64_t seed, uint64_t file, uint64_t index, uint64_t epoch) {
  Rng r(seed);
  uint64_t h = r.Next();
  for (uint64_t v : {file, index, epoch}) {
    Rng m(h ^ (v * 0xD6E8FEB86659FD93ull));
    h = m.Next();
  }
  return h;
}

Rect RandomResizedCropRect(int width, int height, const RandomResizedCropOptions& o, Rng& rng) {
  const double area = static_cast<double>(width) * height;
  const double log_r0 = std::log(o.ratio[0]), log_r1 = std::log(o.ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.Uniform(o.scale[0], o.scale[1]);
    const double aspect = std::exp(rng.Uniform(log_r0, log_r1));
    // Python's round(): half to even, as nearbyint in the default rounding mode.
    const double wf = std::nearbyint(std::sqrt(target_area * aspect));
    const double hf = std::nearbyint(std::sqrt(target_area / aspect));
    if (wf > 0 && wf <= width && hf > 0 && hf <= height) {
      const int w = static_cast<int>(wf), h = static_cast<int>(hf);
      const int i = static_cast<int>(rng.UniformInt(0, height - h + 1));
      const int j = static_cast<int>(rng.UniformInt(0, width - w + 1));
      return Rect{j, i, w, h};
    }
  }
  const double in_ratio = static_cast<double>(width) / height;
  const double rmin = std::min(o.ratio[0], o.ratio[1]), rmax = std::max(o.ratio[0], o.ratio[1]);
  int w = width, h = height;
  if (in_ratio < rmin) {
    w = width;
    h = static_cast<int>(std::nearbyint(w / rmin));
  } else if (in_ratio > rmax) {
    h = height;
    w = static_cast<int>(std::nearbyint(h * rmax));
  }
  return Rect{(width - w) / 2, (height - h) / 2, w, h};
}

}  // namespace recordflow::image
