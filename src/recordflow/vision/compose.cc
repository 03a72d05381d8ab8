// Recipes of image ops compiled into one native map (see compose.h).
//
// Over 600 lines: the per-record chain (decode fusion, pending resample, op dispatch), the batch
// driver (threads, skips, labels, boxes, extra keys, MixUp / CutMix) and the recipe checks share
// the Recipe and State types defined here; the split planned is the 8-bit geometry kernels
// (crop/pad/rotate) into image/ and the column pass-through into its own file.
#include "recordflow/vision/compose.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <numbers>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "recordflow/core/buffer_pool_internal.h"
#include "recordflow/core/enum_names.h"
#include "recordflow/core/thread_pool.h"
#include "recordflow/image/augment.h"
#include "recordflow/image/warp_internal.h"

namespace recordflow::vision {
namespace {

using example::Column;
using image::Box;
using image::DecodedRegion;
using image::Image;
using image::ImageDecoder;
using image::Rect;
using pipeline::Element;
using pipeline::Tensor;

// Idle output batches kept for reuse (the consumer drops one batch per batch taken, so a
// couple suffice); two more while the number of batches out wobbles, released after 16
// batches without need (mapping and zeroing a fresh 150 MB batch costs more than holding it).
constexpr size_t kIdleOutputBuffers = 2;
constexpr size_t kSurplusOutputBuffers = 2;
constexpr size_t kSurplusWindowBatches = 16;

// How the decode is fused with the first op(s).
enum class Fuse : uint8_t { kNone, kRandomResizedCrop, kResize, kResizeCenterCrop };

struct Recipe {
  RecipeOptions o;
  uint64_t seed = 0;
  int out_h = 0;
  int out_w = 0;
  size_t geometry_end = 0;  // ops [0, geometry_end) are geometric; the rest ToDtype / Normalize
  Fuse fuse = Fuse::kNone;
  image::NormalizeOptions norm;
  std::optional<example::ExampleParser> parser;
  // Columns of the parse: image first, then these (-1: absent).
  int label_col = -1;
  int boxes_col = -1;
  std::vector<int> extra_cols;
  std::shared_ptr<std::atomic<uint64_t>> skipped;
  std::shared_ptr<internal::BufferPool> outputs;
};

std::string Where(const Element& e, size_t i) {
  if (i >= e.positions.size()) return "record " + std::to_string(i);
  const pipeline::RecordPosition& p = e.positions[i];
  return "record " + std::to_string(p.index) + " of file #" + std::to_string(p.file) +
         " (byte offset " + std::to_string(p.offset) + ", record " + std::to_string(i) +
         " of the element)";
}

// ---- pixel ops on 8-bit images (any channel count) -----------------------------------------

// The width x height window at (x0, y0) of the image; pixels outside it are zero.
Image CropFill(const Image& in, int x0, int y0, int width, int height) {
  Image out;
  out.width = width;
  out.height = height;
  out.channels = in.channels;
  out.pixels.assign(out.row_bytes() * height, 0);
  const int c = in.channels;
  const int xa = std::max(0, x0), xb = std::min(in.width, x0 + width);
  for (int y = 0; y < height; ++y) {
    const int sy = y0 + y;
    if (sy < 0 || sy >= in.height || xa >= xb) continue;
    std::memcpy(out.row(y) + static_cast<size_t>(xa - x0) * c,
                in.row(sy) + static_cast<size_t>(xa) * c, static_cast<size_t>(xb - xa) * c);
  }
  return out;
}

// Index into [0, n) of position i outside it, per padding mode (-1: the fill value).
int PadIndex(int i, int n, PadMode mode) {
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case PadMode::kConstant:
      return -1;
    case PadMode::kEdge:
      return std::clamp(i, 0, n - 1);
    case PadMode::kReflect: {
      if (n == 1) return 0;
      const int period = 2 * (n - 1);
      int m = i % period;
      if (m < 0) m += period;
      return m < n ? m : period - m;
    }
    case PadMode::kSymmetric: {
      const int period = 2 * n;
      int m = i % period;
      if (m < 0) m += period;
      return m < n ? m : period - 1 - m;
    }
  }
  return -1;
}

Image PadImage(const Image& in, const PadOp& p) {
  Image out;
  out.width = in.width + p.left + p.right;
  out.height = in.height + p.top + p.bottom;
  out.channels = in.channels;
  out.pixels.resize(out.row_bytes() * out.height);
  const int c = in.channels;
  std::vector<int> xs(static_cast<size_t>(out.width));
  for (int x = 0; x < out.width; ++x) xs[x] = PadIndex(x - p.left, in.width, p.mode);
  for (int y = 0; y < out.height; ++y) {
    const int sy = PadIndex(y - p.top, in.height, p.mode);
    uint8_t* d = out.row(y);
    for (int x = 0; x < out.width; ++x) {
      for (int k = 0; k < c; ++k) {
        d[x * c + k] = (sy < 0 || xs[x] < 0) ? p.fill[std::min(k, 2)] : in.row(sy)[xs[x] * c + k];
      }
    }
  }
  return out;
}

Image FlipTopBottom(const Image& in) {
  Image out = in;
  for (int y = 0; y < in.height; ++y) {
    std::memcpy(out.row(y), in.row(in.height - 1 - y), in.row_bytes());
  }
  return out;
}

// torch.rot90(img, k, dims=(H, W)): k quarter turns counter-clockwise.
Image Rotate90(const Image& in, int k) {
  k = ((k % 4) + 4) % 4;
  const int c = in.channels;
  Image out;
  out.channels = c;
  out.width = (k % 2) ? in.height : in.width;
  out.height = (k % 2) ? in.width : in.height;
  out.pixels.resize(out.row_bytes() * out.height);
  for (int y = 0; y < out.height; ++y) {
    for (int x = 0; x < out.width; ++x) {
      int sx = x, sy = y;
      if (k == 1) {
        sx = in.width - 1 - y;
        sy = x;
      } else if (k == 2) {
        sx = in.width - 1 - x;
        sy = in.height - 1 - y;
      } else if (k == 3) {
        sx = y;
        sy = in.height - 1 - x;
      }
      std::memcpy(out.row(y) + static_cast<size_t>(x) * c, in.row(sy) + static_cast<size_t>(sx) * c,
                  static_cast<size_t>(c));
    }
  }
  return out;
}

// The translation (in image-centered pixels) of torchvision's inverse rotation matrix about
// `center` (pixels from the top-left; none: the image center): t = c - R^-1 c.
std::array<double, 2> RotationShift(int width, int height, double degrees,
                                    const std::optional<std::array<double, 2>>& center) {
  if (!center) return {0.0, 0.0};
  const double a = degrees * std::numbers::pi / 180.0;
  const double cs = std::cos(a), sn = std::sin(a);
  const double cx = (*center)[0] - width * 0.5, cy = (*center)[1] - height * 0.5;
  return {cx - (cs * cx - sn * cy), cy - (sn * cx + cs * cy)};
}

// torchvision's output size of rotate(expand=True): the extent of the corners under the
// inverse matrix (its translation `shift` included), rounded as _compute_affine_output_size
// does (truncated to 1e-4 first, so that 90 degrees stays exact).
std::array<int, 2> RotatedSize(int width, int height, double degrees,
                               std::array<double, 2> shift = {0.0, 0.0}) {
  const double a = degrees * std::numbers::pi / 180.0;
  const double cs = std::cos(a), sn = std::sin(a);
  double lo[2] = {1e300, 1e300}, hi[2] = {-1e300, -1e300};
  for (const auto& [px, py] :
       {std::pair{-0.5, -0.5}, std::pair{-0.5, 0.5}, std::pair{0.5, 0.5}, std::pair{0.5, -0.5}}) {
    const double x = px * width, y = py * height;
    const double v[2] = {cs * x - sn * y + shift[0], sn * x + cs * y + shift[1]};
    for (int i = 0; i < 2; ++i) {
      lo[i] = std::min(lo[i], v[i]);
      hi[i] = std::max(hi[i], v[i]);
    }
  }
  std::array<int, 2> wh{};
  for (int i = 0; i < 2; ++i) {
    constexpr double kTol = 1e-4;
    const double cmax = std::ceil(std::trunc(hi[i] / kTol) * kTol);
    const double cmin = std::floor(std::trunc(lo[i] / kTol) * kTol);
    wh[i] = std::max(1, static_cast<int>(cmax - cmin));
  }
  return wh;  // width, height
}

// torchvision's rotate on a uint8 tensor: each output pixel center mapped back by the inverse
// rotation about the image center (grid_sample, align_corners=False, zeros outside), then the
// fill blended by the sampled coverage, rounded half to even.
Image RotateImage(const Image& in, double degrees, image::Interpolation interpolation, bool expand,
                  const std::array<uint8_t, 3>& fill,
                  const std::optional<std::array<double, 2>>& center) {
  int ow = in.width, oh = in.height;
  const auto shift = RotationShift(in.width, in.height, degrees, center);
  if (expand) {
    const auto wh = RotatedSize(in.width, in.height, degrees, shift);
    ow = wh[0];
    oh = wh[1];
  }
  const double a = degrees * std::numbers::pi / 180.0;
  const double cs = std::cos(a), sn = std::sin(a);
  const int c = in.channels;
  Image out;
  out.width = ow;
  out.height = oh;
  out.channels = c;
  out.pixels.resize(out.row_bytes() * oh);
  const bool nearest = interpolation == image::Interpolation::kNearest;
  std::array<uint8_t, 4> fill4{};
  for (int k = 0; k < c && k < 4; ++k) fill4[k] = fill[std::min(k, 2)];
  for (int y = 0; y < oh; ++y) {
    const double yo = y + 0.5 - oh * 0.5;
    uint8_t* d = out.row(y);
    // Source positions are linear in x: the warp kernels step them in fixed point, gather the
    // span inside the image and fill the rest in bulk (bilinear: its interior span only).
    image::internal::WarpRow wr;
    const double xo0 = 0.5 - ow * 0.5;
    wr.sx0 = cs * xo0 - sn * yo + shift[0] + in.width * 0.5 - 0.5;
    wr.sy0 = sn * xo0 + cs * yo + shift[1] + in.height * 0.5 - 0.5;
    wr.dx = cs;
    wr.dy = sn;
    const bool fixed = image::internal::WarpRowFits(wr, ow);
    if (nearest && fixed) {
      image::internal::WarpNearestRow(in, wr, ow, fill4.data(), d);
      continue;
    }
    int lo = 0, hi = 0;
    if (fixed) image::internal::WarpBilinearInterior(in, wr, ow, d, &lo, &hi);
    for (int x = 0; x < ow; ++x) {
      if (x == lo && hi > lo) x = hi;
      if (x >= ow) break;
      const double xo = x + 0.5 - ow * 0.5;
      const double sx = cs * xo - sn * yo + shift[0] + in.width * 0.5 - 0.5;
      const double sy = sn * xo + cs * yo + shift[1] + in.height * 0.5 - 0.5;
      if (nearest) {
        const double rx = std::nearbyint(sx), ry = std::nearbyint(sy);
        const bool inside = rx >= 0 && ry >= 0 && rx < in.width && ry < in.height;
        for (int k = 0; k < c; ++k) {
          d[x * c + k] = inside ? in.row(static_cast<int>(ry))[static_cast<int>(rx) * c + k]
                                : fill[std::min(k, 2)];
        }
        continue;
      }
      const double fx0 = std::floor(sx), fy0 = std::floor(sy);
      const double fx = sx - fx0, fy = sy - fy0;
      const int x0 = static_cast<int>(fx0), y0 = static_cast<int>(fy0);
      double v[4] = {0, 0, 0, 0};
      double mask = 0;
      for (int t = 0; t < 4; ++t) {
        const int tx = x0 + (t & 1), ty = y0 + (t >> 1);
        const double w = ((t & 1) ? fx : 1 - fx) * ((t >> 1) ? fy : 1 - fy);
        if (tx < 0 || ty < 0 || tx >= in.width || ty >= in.height || w == 0) continue;
        mask += w;
        const uint8_t* s = in.row(ty) + static_cast<size_t>(tx) * c;
        for (int k = 0; k < c; ++k) v[k] += w * s[k];
      }
      for (int k = 0; k < c; ++k) {
        const double f = fill[std::min(k, 2)];
        const double r = std::nearbyint((v[k] - f) * mask + f);
        d[x * c + k] = static_cast<uint8_t>(std::clamp(r, 0.0, 255.0));
      }
    }
  }
  return out;
}

// ---- boxes ---------------------------------------------------------------------------------

// Boxes (x0, y0, x1, y1 in pixels of the current image) through a crop at (x, y) of w x h:
// translated and clipped.
void CropBoxes(std::vector<float>& b, double x, double y, double w, double h) {
  for (size_t i = 0; i + 3 < b.size(); i += 4) {
    b[i] = static_cast<float>(std::clamp(b[i] - x, 0.0, w));
    b[i + 1] = static_cast<float>(std::clamp(b[i + 1] - y, 0.0, h));
    b[i + 2] = static_cast<float>(std::clamp(b[i + 2] - x, 0.0, w));
    b[i + 3] = static_cast<float>(std::clamp(b[i + 3] - y, 0.0, h));
  }
}

void ScaleBoxes(std::vector<float>& b, double sx, double sy) {
  for (size_t i = 0; i + 3 < b.size(); i += 4) {
    b[i] = static_cast<float>(b[i] * sx);
    b[i + 1] = static_cast<float>(b[i + 1] * sy);
    b[i + 2] = static_cast<float>(b[i + 2] * sx);
    b[i + 3] = static_cast<float>(b[i + 3] * sy);
  }
}

// The enclosing box of each box's corners mapped by `f`, clipped to width x height.
template <typename F>
void MapBoxCorners(std::vector<float>& b, int width, int height, F f) {
  for (size_t i = 0; i + 3 < b.size(); i += 4) {
    double lo[2] = {1e300, 1e300}, hi[2] = {-1e300, -1e300};
    for (int t = 0; t < 4; ++t) {
      const auto [x, y] = f(static_cast<double>(b[i + ((t & 1) ? 2 : 0)]),
                            static_cast<double>(b[i + ((t >> 1) ? 3 : 1)]));
      lo[0] = std::min(lo[0], x);
      hi[0] = std::max(hi[0], x);
      lo[1] = std::min(lo[1], y);
      hi[1] = std::max(hi[1], y);
    }
    b[i] = static_cast<float>(std::clamp(lo[0], 0.0, static_cast<double>(width)));
    b[i + 1] = static_cast<float>(std::clamp(lo[1], 0.0, static_cast<double>(height)));
    b[i + 2] = static_cast<float>(std::clamp(hi[0], 0.0, static_cast<double>(width)));
    b[i + 3] = static_cast<float>(std::clamp(hi[1], 0.0, static_cast<double>(height)));
  }
}

// RandomAffine's draw, in torchvision's get_params order: angle, translation, scale, shear.
image::AffineOptions SampleAffine(const RandomAffineOp& op, int width, int height,
                                  image::Rng& rng) {
  auto uniform = [&](double lo, double hi) { return lo == hi ? lo : rng.Uniform(lo, hi); };
  image::AffineOptions a;
  a.angle = uniform(op.degrees[0], op.degrees[1]);
  if (op.translate) {
    const double dx = (*op.translate)[0] * width, dy = (*op.translate)[1] * height;
    a.translate = {std::nearbyint(uniform(-dx, dx)), std::nearbyint(uniform(-dy, dy))};
  }
  if (op.scale) a.scale = uniform((*op.scale)[0], (*op.scale)[1]);
  a.shear = {uniform(op.shear[0], op.shear[1]), uniform(op.shear[2], op.shear[3])};
  a.interpolation = op.interpolation;
  a.fill = op.fill;
  a.center = op.center;
  return a;
}

// The forward map (x', y') = (m0 x + m1 y + m2, m3 x + m4 y + m5) of an affine transform in
// pixel coordinates: torchvision's rotation-scale-shear matrix about the center, then the
// translation (what its affine does to bounding boxes).
std::array<double, 6> AffineForward(const image::AffineOptions& a, int width, int height) {
  const double rad = std::numbers::pi / 180.0;
  const double rot = a.angle * rad, sx = a.shear[0] * rad, sy = a.shear[1] * rad;
  const double cx = a.center ? (*a.center)[0] : width * 0.5;
  const double cy = a.center ? (*a.center)[1] : height * 0.5;
  const double m0 = a.scale * std::cos(rot - sy) / std::cos(sy);
  const double m1 = a.scale * (-std::cos(rot - sy) * std::tan(sx) / std::cos(sy) - std::sin(rot));
  const double m3 = a.scale * std::sin(rot - sy) / std::cos(sy);
  const double m4 = a.scale * (-std::sin(rot - sy) * std::tan(sx) / std::cos(sy) + std::cos(rot));
  return {m0, m1, cx + a.translate[0] - m0 * cx - m1 * cy,
          m3, m4, cy + a.translate[1] - m3 * cx - m4 * cy};
}

// The p of the photometric ops torchvision applies with a probability; none for the others.
std::optional<double> ApplyProbability(const OpSpec& op) {
  return std::visit(
      [](const auto& o) -> std::optional<double> {
        using T = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<T, RandomInvertOp> || std::is_same_v<T, RandomPosterizeOp> ||
                      std::is_same_v<T, RandomSolarizeOp> ||
                      std::is_same_v<T, RandomAdjustSharpnessOp> ||
                      std::is_same_v<T, RandomAutocontrastOp> ||
                      std::is_same_v<T, RandomEqualizeOp>) {
          return o.p;
        } else {
          return std::nullopt;
        }
      },
      op);
}

// The kernel of an op ApplyProbability gives a p for.
Result<Image> ApplyKernel(const OpSpec& spec, Image img) {
  if (const auto* op = std::get_if<RandomPosterizeOp>(&spec))
    return image::Posterize(std::move(img), op->bits);
  if (const auto* op = std::get_if<RandomSolarizeOp>(&spec)) {
    return image::Solarize(std::move(img), op->threshold);
  }
  if (const auto* op = std::get_if<RandomAdjustSharpnessOp>(&spec)) {
    return image::AdjustSharpness(img, op->sharpness_factor);
  }
  if (std::holds_alternative<RandomAutocontrastOp>(spec)) {
    return image::AutoContrast(std::move(img));
  }
  if (std::holds_alternative<RandomEqualizeOp>(spec)) return image::Equalize(std::move(img));
  if (std::holds_alternative<RandomInvertOp>(spec)) return image::Invert(std::move(img));
  return InternalError(std::string(OpName(spec)) + " has no probability kernel");
}

// ---- one record ----------------------------------------------------------------------------

// Per pool thread, reused between records.
struct Scratch {
  ImageDecoder decoder;
  DecodedRegion region;
  Image img;  // the current image when not pending
  std::vector<float> floats;
};

// The current image: `img`, or a resample of `src` not yet done (so that it can be fused with
// a flip and the final normalize).
struct State {
  bool pending = false;
  const Image* src = nullptr;
  Box box;
  int ow = 0, oh = 0;
  image::Interpolation interpolation = image::Interpolation::kBilinear;
  bool hflip = false;
  int width = 0, height = 0;  // of the current image
  std::vector<float> boxes;   // pixels of the current image
};

Status Materialize(State& st, Scratch& s) {
  if (!st.pending) return Status::OK();
  RF_ASSIGN_OR_RETURN(Image out, image::Resample(*st.src, st.ow, st.oh, st.interpolation, &st.box));
  s.img = st.hflip ? image::FlipLeftRight(out) : std::move(out);
  st.pending = false;
  st.hflip = false;
  return Status::OK();
}

// A resample of `box` of `src` to w x h, pending.
void SetPending(State& st, const Image* src, const Box& box, int w, int h,
                image::Interpolation interpolation) {
  st.pending = true;
  st.src = src;
  st.box = box;
  st.ow = w;
  st.oh = h;
  st.interpolation = interpolation;
  st.hflip = false;
}

// The source box (image pixels) of Resize(shorter) + CenterCrop(w, h) on a width x height
// image, when the crop fits in the resized image.
std::optional<Box> ResizeCropBox(const ResizeOp& r, const CenterCropOp& c, int width, int height) {
  const auto [rh, rw] = ResizeOutputSize(r, width, height);
  if (c.width > rw || c.height > rh) return std::nullopt;
  const double sx = static_cast<double>(width) / rw, sy = static_cast<double>(height) / rh;
  const double ox = std::nearbyint((rw - c.width) / 2.0),
               oy = std::nearbyint((rh - c.height) / 2.0);
  return Box{ox * sx, oy * sy, c.width * sx, c.height * sy};
}

// Decodes the image into `st` (fused with the first ops as the recipe says); returns the index
// of the first op still to apply.
Result<size_t> DecodeInto(const Recipe& r, std::span<const std::byte> data, image::Rng& rng,
                          bool has_boxes, Scratch& s, State& st) {
  RF_ASSIGN_OR_RETURN(image::ImageHeader header, s.decoder.ReadHeader(data));
  if (header.width <= 0 || header.height <= 0) return DataLossError("image of size 0");
  if (static_cast<uint64_t>(header.width) * static_cast<uint64_t>(header.height) > r.o.max_pixels) {
    return ResourceExhaustedError("image of " + std::to_string(header.width) + "x" +
                                  std::to_string(header.height) + " pixels is over the limit of " +
                                  std::to_string(r.o.max_pixels) + " pixels");
  }
  if (has_boxes && r.o.boxes_normalized) ScaleBoxes(st.boxes, header.width, header.height);
  image::RegionDecodeOptions ro;
  ro.dct_scaling = r.o.dct_scaling;
  ro.max_pixels = r.o.max_pixels;
  Box want{0, 0, static_cast<double>(header.width), static_cast<double>(header.height)};
  int tw = 0, th = 0;
  image::Interpolation interpolation = image::Interpolation::kBilinear;
  size_t next = 0;
  Fuse fuse = r.fuse;
  std::optional<Box> eval_box;
  if (fuse == Fuse::kResizeCenterCrop) {
    eval_box = ResizeCropBox(std::get<ResizeOp>(r.o.ops[0]), std::get<CenterCropOp>(r.o.ops[1]),
                             header.width, header.height);
    if (!eval_box) fuse = Fuse::kResize;  // the crop pads: resize, then crop on its own
  }
  switch (fuse) {
    case Fuse::kNone:
      break;
    case Fuse::kRandomResizedCrop: {
      const auto& op = std::get<RandomResizedCropOp>(r.o.ops[0]);
      const Rect c = image::RandomResizedCropRect(header.width, header.height, op.crop, rng);
      ro.crop = c;
      want = Box{static_cast<double>(c.x), static_cast<double>(c.y), static_cast<double>(c.width),
                 static_cast<double>(c.height)};
      tw = op.width;
      th = op.height;
      interpolation = image::WithAntialias(op.interpolation, op.antialias);
      next = 1;
      break;
    }
    case Fuse::kResize: {
      const auto& op = std::get<ResizeOp>(r.o.ops[0]);
      const auto hw = ResizeOutputSize(op, header.width, header.height);
      th = hw[0];
      tw = hw[1];
      interpolation = image::WithAntialias(op.interpolation, op.antialias);
      next = 1;
      break;
    }
    case Fuse::kResizeCenterCrop: {
      want = *eval_box;
      const auto& c = std::get<CenterCropOp>(r.o.ops[1]);
      tw = c.width;
      th = c.height;
      interpolation = image::WithAntialias(std::get<ResizeOp>(r.o.ops[0]).interpolation,
                                           std::get<ResizeOp>(r.o.ops[0]).antialias);
      // Resize-then-crop filters the kept pixels with their neighbours outside the crop: decode
      // a margin of the filter's support around it, clipped to the image.
      const double radius = interpolation == image::Interpolation::kBicubic ? 2.0 : 1.0;
      const int m =
          static_cast<int>(std::ceil(radius * std::max(want.width / tw, want.height / th))) + 2;
      const int x0 = std::max(0, static_cast<int>(std::floor(want.x)) - m);
      const int y0 = std::max(0, static_cast<int>(std::floor(want.y)) - m);
      const int x1 = std::min(header.width, static_cast<int>(std::ceil(want.x + want.width)) + m);
      const int y1 = std::min(header.height, static_cast<int>(std::ceil(want.y + want.height)) + m);
      ro.crop = Rect{x0, y0, std::max(1, x1 - x0), std::max(1, y1 - y0)};
      next = 2;
      break;
    }
  }
  ro.target_width = tw;
  ro.target_height = th;
  ro.allow_extra_columns = fuse != Fuse::kNone;  // the resample reads `box` only
  RF_RETURN_IF_ERROR(s.decoder.DecodeRegion(data, ro, &s.region));
  if (s.region.image.channels != 3) return InternalError("decoded image is not RGB");
  if (has_boxes && fuse != Fuse::kNone) {
    CropBoxes(st.boxes, want.x, want.y, want.width, want.height);
    ScaleBoxes(st.boxes, tw / want.width, th / want.height);
  }
  if (fuse == Fuse::kNone) {
    std::swap(s.img, s.region.image);
    st.pending = false;
    st.width = s.img.width;
    st.height = s.img.height;
    return next;
  }
  // The wanted box in the decoded region's pixels.
  const double d = s.region.scale_denom;
  const double cx = ro.crop ? ro.crop->x : 0, cy = ro.crop ? ro.crop->y : 0;
  Box box{s.region.box.x + (want.x - cx) / d, s.region.box.y + (want.y - cy) / d, want.width / d,
          want.height / d};
  box.x = std::max(0.0, box.x);
  box.y = std::max(0.0, box.y);
  box.width = std::min(box.width, s.region.image.width - box.x);
  box.height = std::min(box.height, s.region.image.height - box.y);
  SetPending(st, &s.region.image, box, tw, th, interpolation);
  st.width = tw;
  st.height = th;
  return next;
}

Status ApplyOp(const OpSpec& spec, image::Rng& rng, bool has_boxes, Scratch& s, State& st) {
  const Box whole{0, 0, static_cast<double>(st.width), static_cast<double>(st.height)};
  if (const auto* op = std::get_if<RandomResizedCropOp>(&spec)) {
    RF_RETURN_IF_ERROR(Materialize(st, s));
    const Rect c = image::RandomResizedCropRect(st.width, st.height, op->crop, rng);
    const Box b{static_cast<double>(c.x), static_cast<double>(c.y), static_cast<double>(c.width),
                static_cast<double>(c.height)};
    if (has_boxes) {
      CropBoxes(st.boxes, b.x, b.y, b.width, b.height);
      ScaleBoxes(st.boxes, op->width / b.width, op->height / b.height);
    }
    SetPending(st, &s.img, b, op->width, op->height,
               image::WithAntialias(op->interpolation, op->antialias));
    st.width = op->width;
    st.height = op->height;
  } else if (const auto* op = std::get_if<ResizeOp>(&spec)) {
    RF_RETURN_IF_ERROR(Materialize(st, s));
    const auto hw = ResizeOutputSize(*op, st.width, st.height);
    if (has_boxes) {
      ScaleBoxes(st.boxes, static_cast<double>(hw[1]) / st.width,
                 static_cast<double>(hw[0]) / st.height);
    }
    SetPending(st, &s.img, whole, hw[1], hw[0],
               image::WithAntialias(op->interpolation, op->antialias));
    st.width = hw[1];
    st.height = hw[0];
  } else if (const auto* op = std::get_if<CenterCropOp>(&spec)) {
    RF_RETURN_IF_ERROR(Materialize(st, s));
    // torchvision pads a side smaller than the crop by (crop - side) // 2 before it.
    const int x0 = st.width >= op->width
                       ? static_cast<int>(std::nearbyint((st.width - op->width) / 2.0))
                       : -((op->width - st.width) / 2);
    const int y0 = st.height >= op->height
                       ? static_cast<int>(std::nearbyint((st.height - op->height) / 2.0))
                       : -((op->height - st.height) / 2);
    s.img = CropFill(s.img, x0, y0, op->width, op->height);
    if (has_boxes) CropBoxes(st.boxes, x0, y0, op->width, op->height);
    st.width = op->width;
    st.height = op->height;
  } else if (const auto* op = std::get_if<PadOp>(&spec)) {
    RF_RETURN_IF_ERROR(Materialize(st, s));
    s.img = PadImage(s.img, *op);
    st.width = s.img.width;
    st.height = s.img.height;
    if (has_boxes) CropBoxes(st.boxes, -op->left, -op->top, st.width, st.height);
  } else if (const auto* op = std::get_if<RandomHorizontalFlipOp>(&spec)) {
    if (rng.Uniform(0.0, 1.0) < op->p) {
      if (st.pending) {
        st.hflip = !st.hflip;  // folded into the resample
      } else {
        s.img = image::FlipLeftRight(s.img);
      }
      for (size_t i = 0; has_boxes && i + 3 < st.boxes.size(); i += 4) {
        const float x0 = st.boxes[i];
        st.boxes[i] = static_cast<float>(st.width - st.boxes[i + 2]);
        st.boxes[i + 2] = static_cast<float>(st.width - x0);
      }
    }
  } else if (const auto* op = std::get_if<RandomVerticalFlipOp>(&spec)) {
    if (rng.Uniform(0.0, 1.0) < op->p) {
      RF_RETURN_IF_ERROR(Materialize(st, s));
      s.img = FlipTopBottom(s.img);
      for (size_t i = 0; has_boxes && i + 3 < st.boxes.size(); i += 4) {
        const float y0 = st.boxes[i + 1];
        st.boxes[i + 1] = static_cast<float>(st.height - st.boxes[i + 3]);
        st.boxes[i + 3] = static_cast<float>(st.height - y0);
      }
    }
  } else if (const auto* op = std::get_if<RandomRotationOp>(&spec)) {
    const double deg = op->min_degrees == op->max_degrees
                           ? op->min_degrees
                           : rng.Uniform(op->min_degrees, op->max_degrees);
    RF_RETURN_IF_ERROR(Materialize(st, s));
    const int w = st.width, h = st.height;
    s.img = RotateImage(s.img, deg, op->interpolation, op->expand, op->fill, op->center);
    st.width = s.img.width;
    st.height = s.img.height;
    if (has_boxes) {
      const double a = deg * std::numbers::pi / 180.0, cs = std::cos(a), sn = std::sin(a);
      // The forward map of the sampling's inverse: o = R (p - t), centered coordinates.
      const auto t = RotationShift(w, h, deg, op->center);
      const double cx = w * 0.5 + t[0], cy = h * 0.5 + t[1];
      const double ox = st.width * 0.5, oy = st.height * 0.5;
      MapBoxCorners(st.boxes, st.width, st.height, [&](double x, double y) {
        const double dx = x - cx, dy = y - cy;
        return std::pair{ox + cs * dx + sn * dy, oy - sn * dx + cs * dy};
      });
    }
  } else if (const auto* op = std::get_if<ColorJitterOp>(&spec)) {
    RF_RETURN_IF_ERROR(Materialize(st, s));
    RF_ASSIGN_OR_RETURN(s.img, image::ColorJitter(std::move(s.img), op->options, rng));
  } else if (const auto* op = std::get_if<RandomGrayscaleOp>(&spec)) {
    RF_RETURN_IF_ERROR(Materialize(st, s));
    RF_ASSIGN_OR_RETURN(s.img, image::RandomGrayscale(std::move(s.img), op->p, rng));
  } else if (std::holds_alternative<GrayscaleOp>(spec)) {
    RF_RETURN_IF_ERROR(Materialize(st, s));
    RF_ASSIGN_OR_RETURN(s.img, image::RgbToGrayscale(std::move(s.img), 3));
  } else if (const auto* op = std::get_if<GaussianBlurOp>(&spec)) {
    RF_RETURN_IF_ERROR(Materialize(st, s));
    RF_ASSIGN_OR_RETURN(s.img, image::RandomGaussianBlur(s.img, op->options, rng));
  } else if (const auto* op = std::get_if<RandomErasingOp>(&spec)) {
    if (op->random_value && op->options.random_mean.empty()) {
      return InternalError("RandomErasing value='random' was not resolved by Compose");
    }
    RF_RETURN_IF_ERROR(Materialize(st, s));
    RF_ASSIGN_OR_RETURN(s.img, image::RandomErasing(std::move(s.img), op->options, rng));
  } else if (const std::optional<double> p = ApplyProbability(spec)) {
    if (rng.Uniform(0.0, 1.0) < *p) {
      RF_RETURN_IF_ERROR(Materialize(st, s));
      RF_ASSIGN_OR_RETURN(s.img, ApplyKernel(spec, std::move(s.img)));
    }
  } else if (const auto* op = std::get_if<RandomAffineOp>(&spec)) {
    RF_RETURN_IF_ERROR(Materialize(st, s));
    const image::AffineOptions a = SampleAffine(*op, st.width, st.height, rng);
    RF_ASSIGN_OR_RETURN(s.img, image::Affine(s.img, a));
    if (has_boxes) {
      const auto m = AffineForward(a, st.width, st.height);
      MapBoxCorners(st.boxes, st.width, st.height, [&](double x, double y) {
        return std::pair{m[0] * x + m[1] * y + m[2], m[3] * x + m[4] * y + m[5]};
      });
    }
  } else if (const auto* op = std::get_if<AutoAugmentOp>(&spec)) {
    RF_RETURN_IF_ERROR(Materialize(st, s));
    RF_ASSIGN_OR_RETURN(s.img, image::AutoAugment(std::move(s.img), op->options, rng));
  } else if (const auto* op = std::get_if<RandAugmentOp>(&spec)) {
    RF_RETURN_IF_ERROR(Materialize(st, s));
    RF_ASSIGN_OR_RETURN(s.img, image::RandAugment(std::move(s.img), op->rand, op->options, rng));
  } else if (const auto* op = std::get_if<TrivialAugmentWideOp>(&spec)) {
    RF_RETURN_IF_ERROR(Materialize(st, s));
    RF_ASSIGN_OR_RETURN(s.img,
                        image::TrivialAugmentWide(std::move(s.img), op->trivial, op->options, rng));
  } else if (const auto* op = std::get_if<Rotate90Op>(&spec)) {
    RF_RETURN_IF_ERROR(Materialize(st, s));
    const int k = ((op->k % 4) + 4) % 4;
    const int w = st.width, h = st.height;
    s.img = Rotate90(s.img, k);
    st.width = s.img.width;
    st.height = s.img.height;
    if (has_boxes) {
      MapBoxCorners(st.boxes, st.width, st.height, [&](double x, double y) {
        switch (k) {
          case 1:
            return std::pair{y, w - x};
          case 2:
            return std::pair{w - x, h - y};
          case 3:
            return std::pair{h - y, x};
          default:
            return std::pair{x, y};
        }
      });
    }
  }
  return Status::OK();
}

// Decodes, transforms and writes one image into `out`; its boxes (in output pixels) into
// `boxes`.
Status ProcessImage(const Recipe& r, const Element& e, size_t i, std::span<const std::byte> data,
                    bool has_boxes, Scratch& s, std::vector<float>& boxes,
                    std::span<std::byte> out) {
  const pipeline::RecordPosition pos =
      i < e.positions.size() ? e.positions[i] : pipeline::RecordPosition{};
  image::Rng rng(image::ElementSeed(r.seed, pos.file, pos.index, pos.epoch));
  State st;
  st.boxes = std::move(boxes);
  RF_ASSIGN_OR_RETURN(size_t next, DecodeInto(r, data, rng, has_boxes, s, st));
  for (size_t k = next; k < r.geometry_end; ++k) {
    RF_RETURN_IF_ERROR(ApplyOp(r.o.ops[k], rng, has_boxes, s, st));
  }
  if (st.width != r.out_w || st.height != r.out_h) {
    return InternalError("the recipe gave a " + std::to_string(st.width) + "x" +
                         std::to_string(st.height) + " image, not " + std::to_string(r.out_w) +
                         "x" + std::to_string(r.out_h));
  }
  boxes = std::move(st.boxes);
  if (st.pending) {
    image::NormalizeOptions norm = r.norm;
    norm.flip = st.hflip;
    return image::ResampleNormalizeInto(*st.src, st.box, st.ow, st.oh, st.interpolation, norm, out);
  }
  s.floats.assign(s.img.pixels.begin(), s.img.pixels.end());
  return image::NormalizeInto(s.floats, s.img.width, s.img.height, r.norm, out);
}

// ---- columns -------------------------------------------------------------------------------

// Rows `keep` of a parsed column (bytes copied out of views: the records go away).
Column SelectRows(const Column& c, const std::vector<size_t>& keep, size_t n) {
  Column out;
  out.key = c.key;
  out.dtype = c.dtype;
  out.ragged = c.ragged;
  const int64_t total = c.num_values();
  const int64_t per =
      c.ragged || n == 0 ? 0 : total / static_cast<int64_t>(n);  // dense: values per row
  auto range = [&](size_t row) -> std::pair<int64_t, int64_t> {
    if (c.ragged) return {c.row_splits[row], c.row_splits[row + 1]};
    return {static_cast<int64_t>(row) * per, static_cast<int64_t>(row + 1) * per};
  };
  if (c.ragged) out.row_splits.push_back(0);
  if (c.dtype == example::DType::kBytes) out.bytes_offsets.push_back(0);
  for (size_t row : keep) {
    const auto [b, e] = range(row);
    for (int64_t j = b; j < e; ++j) {
      switch (c.dtype) {
        case example::DType::kInt64:
          out.int64s.push_back(c.int64s[j]);
          break;
        case example::DType::kFloat32:
          out.floats.push_back(c.floats[j]);
          break;
        case example::DType::kBytes: {
          if (!c.bytes_views.empty()) {
            const auto v = c.bytes_views[j];
            out.bytes_data.append(reinterpret_cast<const char*>(v.data()), v.size());
          } else {
            out.bytes_data.append(c.bytes_data, c.bytes_offsets[j],
                                  c.bytes_offsets[j + 1] - c.bytes_offsets[j]);
          }
          out.bytes_offsets.push_back(static_cast<int64_t>(out.bytes_data.size()));
          break;
        }
        default:  // parsed columns hold feature types only
          break;
      }
    }
    if (c.ragged) out.row_splits.push_back(static_cast<int64_t>(out.num_values()));
  }
  // Dense: [records, ...]; ragged: [values] (Column's convention).
  out.shape = c.shape;
  if (c.ragged) {
    out.shape = {out.num_values()};
  } else if (!out.shape.empty()) {
    out.shape[0] = static_cast<int64_t>(keep.size());
  }
  return out;
}

const Column* FindColumn(const Element& e, const std::string& key) {
  for (const Column& col : e.columns) {
    if (col.key == key) return &col;
  }
  return nullptr;
}

// The values of record i of a column (ragged or dense with `n` records).
std::pair<int64_t, int64_t> RowRange(const Column& c, size_t i, size_t n) {
  if (c.ragged) return {c.row_splits[i], c.row_splits[i + 1]};
  const int64_t per = n == 0 ? 0 : c.num_values() / static_cast<int64_t>(n);
  return {static_cast<int64_t>(i) * per, static_cast<int64_t>(i + 1) * per};
}

// MixUp / CutMix over the batch in `t` (uint8 or float32, HWC or CHW) in place; returns the
// mixed one-hot labels.
Result<Tensor> MixBatch(const Recipe& r, const Element& e, const std::vector<size_t>& keep,
                        const std::vector<int64_t>& labels, Tensor& t) {
  const BatchMixOptions& m = r.o.batch_mix;
  const auto b = static_cast<int>(keep.size());
  const size_t nc = static_cast<size_t>(m.num_classes);
  Tensor soft;
  soft.key = r.o.label_output;
  soft.dtype = Tensor::DType::kFloat32;
  soft.shape = {b, static_cast<int64_t>(nc)};
  soft.size_bytes = keep.size() * nc * sizeof(float);
  soft.data = std::shared_ptr<std::byte[]>(new std::byte[std::max<size_t>(1, soft.size_bytes)]);
  std::span<float> out(reinterpret_cast<float*>(soft.data.get()), keep.size() * nc);
  if (b == 0) return soft;
  const pipeline::RecordPosition& p0 =
      e.positions.empty() ? pipeline::RecordPosition{} : e.positions[keep[0]];
  // A stream apart from the records' own (which seed the same positions).
  image::Rng rng(image::ElementSeed(r.seed ^ 0x6261746368u, p0.file, p0.index, p0.epoch));
  const bool u8 = r.norm.type == image::TensorType::kUint8;
  image::BatchView v;
  v.batch = b;
  v.u8 = u8 ? reinterpret_cast<uint8_t*>(t.data.get()) : nullptr;
  v.f32 = u8 ? nullptr : reinterpret_cast<float*>(t.data.get());
  const int h = r.out_h, w = r.out_w;
  Status st;
  if (m.kind == BatchMixKind::kMixUp) {
    // Elementwise: any layout (viewed as one row of pixels per sample).
    v.height = 1;
    v.width = h * w;
    v.channels = 3;
    const double lambda = image::SampleBeta(m.alpha, rng);
    st = image::MixUpWithLambda(v, labels, m.num_classes, lambda, out);
  } else {
    const double lambda = image::SampleBeta(m.alpha, rng);
    const Rect box = image::CutMixBox(w, h, lambda, rng);
    if (r.norm.layout == image::Layout::kHWC) {
      v.height = h;
      v.width = w;
      v.channels = 3;
      st = image::CutMixWithBox(v, labels, m.num_classes, box, out);
    } else {
      // CHW: the kernel's labels (an empty box leaves the pixels), then the box of each channel
      // plane copied from the previous sample.
      v.height = h;
      v.width = w;
      v.channels = 3;
      st = image::CutMixWithBox(v, labels, m.num_classes, Rect{0, 0, 0, 0}, out);
      if (st.ok()) {
        const double lam =
            1.0 - static_cast<double>(box.width) * box.height / (static_cast<double>(w) * h);
        for (int i = 0; i < b; ++i) {
          const int j = (i + b - 1) % b;
          for (size_t c = 0; c < nc; ++c) {
            const float a = labels[static_cast<size_t>(i)] == static_cast<int64_t>(c) ? 1.0f : 0.0f;
            const float z = labels[static_cast<size_t>(j)] == static_cast<int64_t>(c) ? 1.0f : 0.0f;
            out[static_cast<size_t>(i) * nc + c] = static_cast<float>(lam * a + (1.0 - lam) * z);
          }
        }
        const size_t es = DTypeSize(r.norm.type);
        const size_t plane = static_cast<size_t>(h) * w * es, per = plane * 3;
        std::vector<std::byte> orig(t.data.get(), t.data.get() + per * keep.size());
        for (int i = 0; i < b; ++i) {
          const int j = (i + b - 1) % b;
          for (int c = 0; c < 3; ++c) {
            for (int y = box.y; y < box.y + box.height; ++y) {
              const size_t off =
                  static_cast<size_t>(c) * plane + (static_cast<size_t>(y) * w + box.x) * es;
              std::memcpy(t.data.get() + static_cast<size_t>(i) * per + off,
                          orig.data() + static_cast<size_t>(j) * per + off,
                          static_cast<size_t>(box.width) * es);
            }
          }
        }
      }
    }
  }
  if (!st.ok()) {
    return Status(st.code(), std::string(m.kind == BatchMixKind::kMixUp ? "MixUp" : "CutMix") +
                                 " of the batch starting at " + Where(e, keep[0]) + ": " +
                                 st.message());
  }
  return soft;
}

struct ParseScratch {
  std::vector<Column> columns;
  std::vector<std::span<const std::byte>> spans;
};

Status Run(const Recipe& r, Element& e, const pipeline::MapContext& context) {
  thread_local ParseScratch ps;
  const RecipeOptions& o = r.o;
  const Column* images = nullptr;
  const Column* labels = nullptr;
  const Column* boxes_col = nullptr;
  std::vector<const Column*> extras;
  if (!e.parsed) {
    ps.spans.clear();
    for (const auto& rec : e.records) {
      ps.spans.push_back(std::as_bytes(std::span(rec.data(), rec.size())));
    }
    example::ParseOptions po;
    po.max_parallelism = 1;  // already on a pool thread
    po.bytes_as_views = true;
    RF_RETURN_IF_ERROR(r.parser->Parse(ps.spans, &ps.columns, po));
    images = &ps.columns[0];
    if (r.label_col >= 0) labels = &ps.columns[static_cast<size_t>(r.label_col)];
    if (r.boxes_col >= 0) boxes_col = &ps.columns[static_cast<size_t>(r.boxes_col)];
    for (int k : r.extra_cols) extras.push_back(&ps.columns[static_cast<size_t>(k)]);
  } else {
    images = FindColumn(e, o.image_key);
    if (images == nullptr || images->dtype != example::DType::kBytes || images->ragged) {
      return InvalidArgumentError("the parsed element has no dense bytes feature '" + o.image_key +
                                  "'");
    }
    if (o.label_mode != LabelMode::kNone) {
      labels = FindColumn(e, o.label_key);
      const bool want_ragged = o.label_mode != LabelMode::kInt;
      if (labels == nullptr || labels->dtype != example::DType::kInt64 ||
          labels->ragged != want_ragged) {
        return InvalidArgumentError("the parsed element has no " +
                                    std::string(want_ragged ? "ragged" : "dense") +
                                    " int64 feature '" + o.label_key + "'");
      }
    }
    if (!o.boxes_key.empty()) {
      boxes_col = FindColumn(e, o.boxes_key);
      if (boxes_col == nullptr || boxes_col->dtype != example::DType::kFloat32) {
        return InvalidArgumentError("the parsed element has no float feature '" + o.boxes_key +
                                    "'");
      }
    }
    for (const auto& spec : o.extra_keys) {
      const Column* c = FindColumn(e, spec.key);
      if (c == nullptr) {
        return InvalidArgumentError("the parsed element has no feature '" + spec.key + "'");
      }
      extras.push_back(c);
    }
  }
  const size_t n = static_cast<size_t>(images->num_values());
  if (labels != nullptr && o.label_mode == LabelMode::kInt &&
      static_cast<size_t>(labels->int64s.size()) != n) {
    return InvalidArgumentError("'" + o.label_key + "' must hold one value per record");
  }
  auto image_bytes = [&](size_t i) -> std::span<const std::byte> {
    if (!images->bytes_views.empty()) return images->bytes_views[i];
    const int64_t b = images->bytes_offsets[i], end = images->bytes_offsets[i + 1];
    return std::as_bytes(std::span(images->bytes_data.data() + b, static_cast<size_t>(end - b)));
  };
  // Per-record boxes in, transformed boxes out.
  std::vector<std::vector<float>> boxes(boxes_col != nullptr ? n : 0);
  for (size_t i = 0; i < boxes.size(); ++i) {
    const auto [b, end] = RowRange(*boxes_col, i, n);
    if ((end - b) % 4 != 0) {
      return InvalidArgumentError("boxes '" + o.boxes_key + "' of " + Where(e, i) + " hold " +
                                  std::to_string(end - b) + " values, not a multiple of 4");
    }
    boxes[i].assign(boxes_col->floats.begin() + b, boxes_col->floats.begin() + end);
  }
  const size_t per_image = static_cast<size_t>(r.out_w) * r.out_h * 3 * DTypeSize(r.norm.type);
  Tensor t;
  t.key = o.image_output;
  t.dtype = r.norm.type;
  t.data = r.outputs->Acquire(per_image * n);  // every byte handed out is written below
  std::vector<Status> failed(n);
  std::atomic<size_t> next{0};
  std::atomic<bool> any_failed{false};
  const bool skip = o.on_corruption == format::CorruptionPolicy::kSkip;
  const bool has_boxes = boxes_col != nullptr;
  auto work = [&](size_t, size_t) {
    thread_local Scratch mine;
    // Claims go in order, so the first failing image of the batch is always met.
    size_t i = 0;
    while (!(!skip && any_failed.load(std::memory_order_relaxed)) && !context.cancelled() &&
           (i = next.fetch_add(1, std::memory_order_relaxed)) < n) {
      std::span<std::byte> out(t.data.get() + i * per_image, per_image);
      std::vector<float> none;
      Status st =
          ProcessImage(r, e, i, image_bytes(i), has_boxes, mine, has_boxes ? boxes[i] : none, out);
      if (!st.ok()) {
        failed[i] = std::move(st);
        any_failed.store(true, std::memory_order_relaxed);
      }
    }
  };
  const int threads = std::max(1, context.threads);
  if (threads > 1 && n > 1) {
    ParallelFor(static_cast<size_t>(threads), 1, threads, work);
  } else {
    work(0, 1);
  }
  if (context.cancelled()) return CancelledError("the iterator closed");
  std::vector<size_t> keep;
  keep.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (!failed[i].ok()) {
      // Positions stay those of all records read: checkpoints count records, not outputs.
      if (skip) {
        r.skipped->fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      const Status& st = failed[i];
      return Status(st.code(),
                    "image '" + o.image_key + "' of " + Where(e, i) + ": " + st.message());
    }
    if (keep.size() != i) {
      std::memmove(t.data.get() + keep.size() * per_image, t.data.get() + i * per_image, per_image);
    }
    keep.push_back(i);
  }
  const auto kept = static_cast<int64_t>(keep.size());
  std::vector<Column> columns;
  std::vector<Tensor> tensors;
  t.size_bytes = keep.size() * per_image;
  if (r.norm.layout == image::Layout::kHWC) {
    t.shape = {kept, r.out_h, r.out_w, 3};
  } else {
    t.shape = {kept, 3, r.out_h, r.out_w};
  }
  tensors.push_back(std::move(t));
  // Labels.
  if (o.batch_mix.kind != BatchMixKind::kNone) {
    std::vector<int64_t> ids;
    ids.reserve(keep.size());
    for (size_t i : keep) ids.push_back(labels->int64s[i]);
    RF_ASSIGN_OR_RETURN(Tensor soft, MixBatch(r, e, keep, ids, tensors[0]));
    tensors.push_back(std::move(soft));
  } else if (o.label_mode == LabelMode::kInt) {
    Column label;
    label.key = o.label_output;
    label.dtype = example::DType::kInt64;
    label.int64s.reserve(keep.size());
    for (size_t i : keep) label.int64s.push_back(labels->int64s[i]);
    label.shape = {kept};
    columns.push_back(std::move(label));
  } else if (o.label_mode != LabelMode::kNone) {
    const bool hot = o.label_mode == LabelMode::kMultiHot;
    const size_t nc = static_cast<size_t>(o.num_classes);
    const size_t row_bytes = nc * (hot ? sizeof(float) : sizeof(int64_t));
    Tensor lt;
    lt.key = o.label_output;
    lt.dtype = hot ? Tensor::DType::kFloat32 : Tensor::DType::kInt64;
    lt.shape = {kept, static_cast<int64_t>(nc)};
    lt.size_bytes = row_bytes * keep.size();
    lt.data = std::shared_ptr<std::byte[]>(new std::byte[std::max<size_t>(1, lt.size_bytes)]);
    for (size_t k = 0; k < keep.size(); ++k) {
      const auto [b, end] = RowRange(*labels, keep[k], n);
      std::byte* row = lt.data.get() + k * row_bytes;
      if (hot) {
        std::vector<float> v(nc, 0.0f);
        for (int64_t j = b; j < end; ++j) {
          const int64_t cls = labels->int64s[j];
          if (cls < 0 || cls >= o.num_classes) {
            return InvalidArgumentError("label '" + o.label_key + "' of " + Where(e, keep[k]) +
                                        ": class " + std::to_string(cls) + " is outside [0, " +
                                        std::to_string(o.num_classes) + ")");
          }
          v[static_cast<size_t>(cls)] = 1.0f;
        }
        std::memcpy(row, v.data(), row_bytes);
      } else {
        if (end - b > o.num_classes) {
          return InvalidArgumentError("label '" + o.label_key + "' of " + Where(e, keep[k]) +
                                      " holds " + std::to_string(end - b) +
                                      " values, more than the " + std::to_string(o.num_classes) +
                                      " of the padded output");
        }
        std::vector<int64_t> v(nc, -1);
        std::copy(labels->int64s.begin() + b, labels->int64s.begin() + end, v.begin());
        std::memcpy(row, v.data(), row_bytes);
      }
    }
    tensors.push_back(std::move(lt));
  }
  // Boxes (output pixels, or normalized) and their mask.
  if (has_boxes) {
    Column bc, mask;
    bc.key = o.boxes_output;
    bc.dtype = example::DType::kFloat32;
    bc.ragged = true;
    mask.key = o.boxes_output + "_mask";
    mask.dtype = example::DType::kInt64;
    mask.ragged = true;
    bc.row_splits.push_back(0);
    mask.row_splits.push_back(0);
    const double sx = o.boxes_normalized ? 1.0 / r.out_w : 1.0;
    const double sy = o.boxes_normalized ? 1.0 / r.out_h : 1.0;
    for (size_t i : keep) {
      const std::vector<float>& b = boxes[i];
      for (size_t j = 0; j + 3 < b.size(); j += 4) {
        bc.floats.push_back(static_cast<float>(b[j] * sx));
        bc.floats.push_back(static_cast<float>(b[j + 1] * sy));
        bc.floats.push_back(static_cast<float>(b[j + 2] * sx));
        bc.floats.push_back(static_cast<float>(b[j + 3] * sy));
        mask.int64s.push_back(b[j + 2] > b[j] && b[j + 3] > b[j + 1] ? 1 : 0);
      }
      bc.row_splits.push_back(static_cast<int64_t>(bc.floats.size()));
      mask.row_splits.push_back(static_cast<int64_t>(mask.int64s.size()));
    }
    bc.shape = {static_cast<int64_t>(bc.floats.size())};  // ragged: [values]
    mask.shape = {static_cast<int64_t>(mask.int64s.size())};
    columns.push_back(std::move(bc));
    columns.push_back(std::move(mask));
  }
  for (const Column* c : extras) columns.push_back(SelectRows(*c, keep, n));
  e.columns = std::move(columns);
  e.tensors = std::move(tensors);
  e.records.clear();
  e.parsed = true;
  return Status::OK();
}

// ---- compile -------------------------------------------------------------------------------

std::string OpWhere(size_t k, const OpSpec& op) {
  return "op #" + std::to_string(k) + " (" + std::string(OpName(op)) + ")";
}

// Resize and RandomResizedCrop take torchvision's nearest, bilinear and bicubic (antialias
// either way) and area; the *NoAntialias filters are selected by the flag, not named.
Status CheckInterpolation(image::Interpolation interpolation, const std::string& w) {
  if (interpolation == image::Interpolation::kBilinearNoAntialias ||
      interpolation == image::Interpolation::kBicubicNoAntialias) {
    return InvalidArgumentError(w +
                                ": interpolation must be nearest, bilinear, bicubic or area "
                                "(antialias=False selects the unfiltered variant)");
  }
  return Status::OK();
}

Status CheckRange(const std::array<double, 2>& v, const std::string& what) {
  if (!(std::isfinite(v[0]) && std::isfinite(v[1]) && v[0] > 0 && v[0] <= v[1])) {
    return InvalidArgumentError(what + " must be an increasing range of positive numbers");
  }
  return Status::OK();
}

Status CheckSize(int h, int w, const std::string& where) {
  if (h <= 0 || w <= 0 || h > 16384 || w > 16384) {
    return InvalidArgumentError(where + ": size must be in 1..16384, got " + std::to_string(h) +
                                "x" + std::to_string(w));
  }
  return Status::OK();
}

bool IsPhotometric(const OpSpec& op) {
  return std::holds_alternative<ColorJitterOp>(op) ||
         std::holds_alternative<RandomGrayscaleOp>(op) || std::holds_alternative<GrayscaleOp>(op) ||
         std::holds_alternative<GaussianBlurOp>(op) ||
         std::holds_alternative<RandomErasingOp>(op) ||
         std::holds_alternative<RandomInvertOp>(op) ||
         std::holds_alternative<RandomPosterizeOp>(op) ||
         std::holds_alternative<RandomSolarizeOp>(op) ||
         std::holds_alternative<RandomAdjustSharpnessOp>(op) ||
         std::holds_alternative<RandomAutocontrastOp>(op) ||
         std::holds_alternative<RandomEqualizeOp>(op) ||
         std::holds_alternative<AutoAugmentOp>(op) || std::holds_alternative<RandAugmentOp>(op) ||
         std::holds_alternative<TrivialAugmentWideOp>(op);
}

// Runs a photometric op on a small image so that parameters the kernels refuse are reported
// when the recipe is made, not at its first record.
Status DryRun(const OpSpec& op, const std::string& where) {
  thread_local Scratch s;
  State st;
  st.width = st.height = 8;
  s.img.width = s.img.height = 8;
  s.img.channels = 3;
  s.img.pixels.assign(8 * 8 * 3, 100);
  image::Rng rng(1);
  // value="random" is resolved by Compose from the Normalize after it (OutputSize runs first,
  // op by op): the trial fill stands in for it.
  OpSpec probe = op;
  if (auto* erase = std::get_if<RandomErasingOp>(&probe);
      erase != nullptr && erase->random_value && erase->options.random_mean.empty()) {
    erase->options.random_mean = {128.0};
    erase->options.random_std = {64.0};
  }
  Status status = ApplyOp(probe, rng, false, s, st);
  if (!status.ok()) return Status(status.code(), where + ": " + status.message());
  if (s.img.channels != 3 || s.img.width != 8 || s.img.height != 8) {
    return InvalidArgumentError(where + ": the op changes the image's shape or channels");
  }
  return Status::OK();
}

}  // namespace

namespace {

constexpr EnumName<PadMode> kPadModeNames[] = {
    {PadMode::kConstant, "constant"},
    {PadMode::kEdge, "edge"},
    {PadMode::kReflect, "reflect"},
    {PadMode::kSymmetric, "symmetric"},
};

}  // namespace

Result<PadMode> ParsePadMode(std::string_view name) {
  if (std::optional<PadMode> mode = FindByName(kPadModeNames, name)) return *mode;
  return InvalidArgumentError("padding_mode must be " + NameList(kPadModeNames, "") + ", got '" +
                              std::string(name) + "'");
}

std::string_view OpName(const OpSpec& op) {
  static constexpr std::string_view kNames[] = {"RandomResizedCrop",
                                                "Resize",
                                                "CenterCrop",
                                                "Pad",
                                                "RandomHorizontalFlip",
                                                "RandomVerticalFlip",
                                                "RandomRotation",
                                                "Rotate90",
                                                "ToDtype",
                                                "Normalize",
                                                "ColorJitter",
                                                "RandomGrayscale",
                                                "Grayscale",
                                                "GaussianBlur",
                                                "RandomErasing",
                                                "RandomInvert",
                                                "RandomPosterize",
                                                "RandomSolarize",
                                                "RandomAdjustSharpness",
                                                "RandomAutocontrast",
                                                "RandomEqualize",
                                                "RandomAffine",
                                                "AutoAugment",
                                                "RandAugment",
                                                "TrivialAugmentWide"};
  static_assert(std::size(kNames) == std::variant_size_v<OpSpec>);
  return kNames[op.index()];
}

std::array<int, 2> ResizeOutputSize(const ResizeOp& op, int width, int height) {
  if (op.shorter <= 0) return {op.height, op.width};
  const bool w_short = width <= height;
  const int s = w_short ? width : height, l = w_short ? height : width;
  int new_short = op.shorter;
  int new_long = static_cast<int>(static_cast<double>(static_cast<int64_t>(op.shorter) * l) / s);
  if (op.max_size && new_long > *op.max_size) {
    new_short = static_cast<int>(
        static_cast<double>(static_cast<int64_t>(*op.max_size) * new_short) / new_long);
    new_long = *op.max_size;
  }
  new_short = std::max(1, new_short);
  new_long = std::max(1, new_long);
  return w_short ? std::array<int, 2>{new_long, new_short}
                 : std::array<int, 2>{new_short, new_long};
}

Result<std::array<int, 2>> OutputSize(const std::vector<OpSpec>& ops) {
  std::array<int, 2> hw{};
  bool known = false;  // false: the size varies per image
  bool tail = false;
  bool to_float = false;
  for (size_t k = 0; k < ops.size(); ++k) {
    const OpSpec& spec = ops[k];
    const std::string w = OpWhere(k, spec);
    const bool is_tail =
        std::holds_alternative<ToDtypeOp>(spec) || std::holds_alternative<NormalizeOp>(spec);
    if (tail && !is_tail) {
      return InvalidArgumentError(w +
                                  " comes after ToDtype / Normalize: image ops must come "
                                  "before them");
    }
    tail = tail || is_tail;
    if (const auto* op = std::get_if<RandomResizedCropOp>(&spec)) {
      RF_RETURN_IF_ERROR(CheckSize(op->height, op->width, w));
      RF_RETURN_IF_ERROR(CheckRange(op->crop.scale, w + ": scale"));
      RF_RETURN_IF_ERROR(CheckRange(op->crop.ratio, w + ": ratio"));
      if (op->crop.scale[1] > 1e6) return InvalidArgumentError(w + ": scale is too large");
      RF_RETURN_IF_ERROR(CheckInterpolation(op->interpolation, w));
      hw = {op->height, op->width};
      known = true;
    } else if (const auto* op = std::get_if<ResizeOp>(&spec)) {
      RF_RETURN_IF_ERROR(CheckInterpolation(op->interpolation, w));
      if (op->shorter > 0) {
        RF_RETURN_IF_ERROR(CheckSize(op->shorter, op->shorter, w));
        if (op->max_size && *op->max_size <= op->shorter) {
          return InvalidArgumentError(w + ": max_size (" + std::to_string(*op->max_size) +
                                      ") must be larger than size (" + std::to_string(op->shorter) +
                                      ")");
        }
        if (known) hw = ResizeOutputSize(*op, hw[1], hw[0]);
      } else {
        RF_RETURN_IF_ERROR(CheckSize(op->height, op->width, w));
        if (op->max_size) {
          return InvalidArgumentError(w + ": max_size needs size to be a single int");
        }
        hw = {op->height, op->width};
        known = true;
      }
    } else if (const auto* op = std::get_if<CenterCropOp>(&spec)) {
      RF_RETURN_IF_ERROR(CheckSize(op->height, op->width, w));
      hw = {op->height, op->width};
      known = true;
    } else if (const auto* op = std::get_if<PadOp>(&spec)) {
      if (op->left < 0 || op->top < 0 || op->right < 0 || op->bottom < 0 || op->left > 16384 ||
          op->top > 16384 || op->right > 16384 || op->bottom > 16384) {
        return InvalidArgumentError(w + ": padding must be in 0..16384");
      }
      if (known) hw = {hw[0] + op->top + op->bottom, hw[1] + op->left + op->right};
    } else if (const auto* op = std::get_if<RandomHorizontalFlipOp>(&spec)) {
      if (!(op->p >= 0 && op->p <= 1)) return InvalidArgumentError(w + ": p must be in [0, 1]");
    } else if (const auto* op = std::get_if<RandomVerticalFlipOp>(&spec)) {
      if (!(op->p >= 0 && op->p <= 1)) return InvalidArgumentError(w + ": p must be in [0, 1]");
    } else if (const auto* op = std::get_if<RandomRotationOp>(&spec)) {
      if (!(std::isfinite(op->min_degrees) && std::isfinite(op->max_degrees) &&
            op->min_degrees <= op->max_degrees)) {
        return InvalidArgumentError(w + ": degrees must be an increasing finite range");
      }
      if (op->interpolation != image::Interpolation::kNearest &&
          op->interpolation != image::Interpolation::kBilinear) {
        // torchvision's rotate on tensors takes these two only.
        return InvalidArgumentError(w + ": interpolation must be nearest or bilinear");
      }
      if (op->center && !(std::isfinite((*op->center)[0]) && std::isfinite((*op->center)[1]))) {
        return InvalidArgumentError(w + ": center must be two finite numbers");
      }
      if (op->expand && known) {
        if (op->min_degrees != op->max_degrees) {
          known = false;
        } else {
          const auto s = RotatedSize(hw[1], hw[0], op->min_degrees,
                                     RotationShift(hw[1], hw[0], op->min_degrees, op->center));
          hw = {s[1], s[0]};
        }
      }
    } else if (const auto* op = std::get_if<Rotate90Op>(&spec)) {
      if (known && (op->k % 2) != 0) hw = {hw[1], hw[0]};
    } else if (const auto* op = std::get_if<RandomGrayscaleOp>(&spec)) {
      if (!(op->p >= 0 && op->p <= 1)) return InvalidArgumentError(w + ": p must be in [0, 1]");
    } else if (const auto* op = std::get_if<GaussianBlurOp>(&spec)) {
      const auto& g = op->options;
      for (int k : g.kernel_size) {
        if (k <= 0 || k % 2 == 0 || k > 1001) {
          return InvalidArgumentError(w + ": kernel_size must be odd and positive");
        }
      }
      if (!(g.sigma[0] > 0 && g.sigma[0] <= g.sigma[1] && std::isfinite(g.sigma[1]))) {
        return InvalidArgumentError(w + ": sigma must be an increasing range of positive numbers");
      }
    } else if (const auto* op = std::get_if<RandomErasingOp>(&spec)) {
      const auto& g = op->options;
      if (!(g.p >= 0 && g.p <= 1)) return InvalidArgumentError(w + ": p must be in [0, 1]");
      if (!(g.scale[0] >= 0 && g.scale[0] <= g.scale[1] && g.scale[1] <= 1)) {
        return InvalidArgumentError(w + ": scale must be an increasing range within [0, 1]");
      }
      RF_RETURN_IF_ERROR(CheckRange(g.ratio, w + ": ratio"));
      if (g.value.size() != 1 && g.value.size() != 3) {
        return InvalidArgumentError(w + ": value must be one number or three");
      }
    } else if (const std::optional<double> p = ApplyProbability(spec); p && !(*p >= 0 && *p <= 1)) {
      return InvalidArgumentError(w + ": p must be in [0, 1]");
    } else if (const auto* op = std::get_if<RandomPosterizeOp>(&spec);
               op != nullptr && (op->bits < 0 || op->bits > 8)) {
      return InvalidArgumentError(w + ": bits must be in 0..8");
    } else if (const auto* op = std::get_if<RandomSolarizeOp>(&spec);
               op != nullptr && !(op->threshold >= 0 && op->threshold <= 255)) {
      return InvalidArgumentError(w + ": threshold must be in 0..255 (uint8 image)");
    } else if (const auto* op = std::get_if<RandomAdjustSharpnessOp>(&spec);
               op != nullptr &&
               !(op->sharpness_factor >= 0 && std::isfinite(op->sharpness_factor))) {
      return InvalidArgumentError(w + ": sharpness_factor must be a non-negative number");
    } else if (const auto* op = std::get_if<RandomAffineOp>(&spec)) {
      const bool finite = std::all_of(op->degrees.begin(), op->degrees.end(),
                                      [](double v) { return std::isfinite(v); }) &&
                          std::all_of(op->shear.begin(), op->shear.end(),
                                      [](double v) { return std::isfinite(v); });
      if (!finite || op->degrees[0] > op->degrees[1] || op->shear[0] > op->shear[1] ||
          op->shear[2] > op->shear[3]) {
        return InvalidArgumentError(w + ": degrees and shear must be increasing finite ranges");
      }
      if (std::any_of(op->shear.begin(), op->shear.end(),
                      [](double v) { return std::abs(v) >= 90; })) {
        return InvalidArgumentError(w + ": shear must be within (-90, 90) degrees");
      }
      if (op->translate && !((*op->translate)[0] >= 0 && (*op->translate)[0] <= 1 &&
                             (*op->translate)[1] >= 0 && (*op->translate)[1] <= 1)) {
        return InvalidArgumentError(w + ": translate values must be in [0, 1]");
      }
      if (op->scale) RF_RETURN_IF_ERROR(CheckRange(*op->scale, w + ": scale"));
      if (op->center && !(std::isfinite((*op->center)[0]) && std::isfinite((*op->center)[1]))) {
        return InvalidArgumentError(w + ": center must be two finite numbers");
      }
      if (op->fill.size() > 1 && op->fill.size() != 3) {
        return InvalidArgumentError(w + ": fill must be one number or three");
      }
    } else if (const auto* op = std::get_if<RandAugmentOp>(&spec)) {
      if (op->rand.num_ops < 0 || op->rand.num_magnitude_bins < 2 || op->rand.magnitude < 0 ||
          op->rand.magnitude >= op->rand.num_magnitude_bins) {
        return InvalidArgumentError(w +
                                    ": needs num_ops >= 0, num_magnitude_bins >= 2 and 0 <= "
                                    "magnitude < num_magnitude_bins");
      }
    } else if (const auto* op = std::get_if<TrivialAugmentWideOp>(&spec)) {
      if (op->trivial.num_magnitude_bins < 2) {
        return InvalidArgumentError(w + ": num_magnitude_bins must be >= 2");
      }
    }
    if (IsPhotometric(spec)) RF_RETURN_IF_ERROR(DryRun(spec, w));
    if (const auto* op = std::get_if<ToDtypeOp>(&spec)) {
      to_float = op->dtype != image::TensorType::kUint8;
    } else if (std::holds_alternative<NormalizeOp>(spec)) {
      if (!to_float) {
        return InvalidArgumentError(w +
                                    ": Normalize needs a float image: put ToDtype(float32, "
                                    "scale=True) before it");
      }
      const auto& n = std::get<NormalizeOp>(spec);
      for (int c = 0; c < 3; ++c) {
        if (!(n.std[c] > 0) || !std::isfinite(n.mean[c]) || !std::isfinite(n.std[c])) {
          return InvalidArgumentError(w + ": std must be positive and mean finite");
        }
      }
    }
  }
  if (!known) {
    return InvalidArgumentError(
        "the recipe's output size varies per image: end its image ops with one that fixes it "
        "(RandomResizedCrop, CenterCrop, Resize((h, w)))");
  }
  return hw;
}

namespace {

// value="random" of each RandomErasing: the pixel-unit mean and std that the Normalize after it
// maps to N(0, 1) (x255 when the ToDtype between them scales to [0, 1]).
Status ResolveRandomErasing(std::vector<OpSpec>& ops) {
  for (size_t i = 0; i < ops.size(); ++i) {
    auto* erase = std::get_if<RandomErasingOp>(&ops[i]);
    if (erase == nullptr || !erase->random_value) continue;
    double unit = 1.0;
    const NormalizeOp* normalize = nullptr;
    for (size_t j = i + 1; j < ops.size() && normalize == nullptr; ++j) {
      if (const auto* to = std::get_if<ToDtypeOp>(&ops[j])) unit = to->scale ? 255.0 : 1.0;
      normalize = std::get_if<NormalizeOp>(&ops[j]);
    }
    if (normalize == nullptr) {
      return InvalidArgumentError("op " + std::to_string(i) +
                                  " (RandomErasing): value='random' fills N(0, 1) in the "
                                  "normalized domain, so it needs a Normalize after it");
    }
    erase->options.random_mean.clear();
    erase->options.random_std.clear();
    for (int c = 0; c < 3; ++c) {
      erase->options.random_mean.push_back(unit * normalize->mean[c]);
      erase->options.random_std.push_back(unit * normalize->std[c]);
    }
  }
  return Status::OK();
}

}  // namespace

Result<pipeline::MapOp> Compose(RecipeOptions options) {
  RF_RETURN_IF_ERROR(ResolveRandomErasing(options.ops));
  auto r = std::make_shared<Recipe>();
  RF_ASSIGN_OR_RETURN(auto hw, OutputSize(options.ops));
  r->out_h = hw[0];
  r->out_w = hw[1];
  if (options.image_key.empty()) return InvalidArgumentError("empty image key");
  if (options.label_mode != LabelMode::kNone && options.label_key.empty()) {
    return InvalidArgumentError("empty label key");
  }
  if ((options.label_mode == LabelMode::kMultiHot || options.label_mode == LabelMode::kPadded) &&
      (options.num_classes <= 0 || options.num_classes > (1 << 24))) {
    return InvalidArgumentError(
        "num_classes must be in 1..16777216 for multi-hot or padded labels");
  }
  // Outputs must not collide.
  std::vector<std::string> outs = {options.image_output};
  if (options.label_mode != LabelMode::kNone) outs.push_back(options.label_output);
  if (!options.boxes_key.empty()) {
    outs.push_back(options.boxes_output);
    outs.push_back(options.boxes_output + "_mask");
  }
  for (const auto& s : options.extra_keys) outs.push_back(s.key);
  for (size_t i = 0; i < outs.size(); ++i) {
    for (size_t j = i + 1; j < outs.size(); ++j) {
      if (outs[i] == outs[j]) {
        return InvalidArgumentError("two outputs are named '" + outs[i] + "'");
      }
    }
  }
  // The tail: dtype, scale and normalization.
  r->geometry_end = options.ops.size();
  image::NormalizeOptions norm;
  norm.type = image::TensorType::kUint8;
  norm.mean = {0, 0, 0};
  norm.std = {1, 1, 1};
  bool scale = true;
  bool normalized = false;
  for (size_t k = 0; k < options.ops.size(); ++k) {
    if (const auto* op = std::get_if<ToDtypeOp>(&options.ops[k])) {
      r->geometry_end = std::min(r->geometry_end, k);
      norm.type = op->dtype;
      scale = op->scale;
    } else if (const auto* op = std::get_if<NormalizeOp>(&options.ops[k])) {
      r->geometry_end = std::min(r->geometry_end, k);
      if (normalized) return InvalidArgumentError(OpWhere(k, options.ops[k]) + ": Normalize twice");
      normalized = true;
      norm.mean = op->mean;
      norm.std = op->std;
    }
  }
  if (norm.type != image::TensorType::kUint8 && !scale) {
    // Values 0..255: (x - mean) / std = (x / 255 - mean / 255) / (std / 255).
    for (int c = 0; c < 3; ++c) {
      norm.mean[c] /= 255.0f;
      norm.std[c] /= 255.0f;
    }
  }
  norm.layout = options.layout;
  r->norm = norm;
  if (options.batch_mix.kind != BatchMixKind::kNone) {
    const std::string w = options.batch_mix.kind == BatchMixKind::kMixUp ? "MixUp" : "CutMix";
    if (options.label_mode != LabelMode::kInt) {
      return InvalidArgumentError(w + " needs one int label per record (label_mode int)");
    }
    if (options.batch_mix.num_classes <= 0 || options.batch_mix.num_classes > (1 << 24)) {
      return InvalidArgumentError(w + ": num_classes must be in 1..16777216");
    }
    if (!(options.batch_mix.alpha > 0) || !std::isfinite(options.batch_mix.alpha)) {
      return InvalidArgumentError(w + ": alpha must be positive");
    }
    if (norm.type != image::TensorType::kUint8 && norm.type != image::TensorType::kFloat32) {
      return InvalidArgumentError(w + " needs a uint8 or float32 image");
    }
  }
  // Fusion with the decode.
  const auto& ops = options.ops;
  if (r->geometry_end >= 1 && std::holds_alternative<RandomResizedCropOp>(ops[0])) {
    r->fuse = Fuse::kRandomResizedCrop;
  } else if (r->geometry_end >= 2 && std::holds_alternative<ResizeOp>(ops[0]) &&
             std::get<ResizeOp>(ops[0]).shorter > 0 &&
             std::holds_alternative<CenterCropOp>(ops[1])) {
    r->fuse = Fuse::kResizeCenterCrop;
  } else if (r->geometry_end >= 1 && std::holds_alternative<ResizeOp>(ops[0])) {
    r->fuse = Fuse::kResize;
  }
  // The parser: image, label, boxes, extras.
  std::vector<example::FeatureSpec> specs;
  specs.push_back(example::FeatureSpec::FixedLen(options.image_key, example::DType::kBytes));
  if (options.label_mode == LabelMode::kInt) {
    std::optional<example::Feature> def;
    if (options.default_label) def = example::Feature::Int64s({*options.default_label});
    r->label_col = static_cast<int>(specs.size());
    specs.push_back(
        example::FeatureSpec::FixedLen(options.label_key, example::DType::kInt64, {}, def));
  } else if (options.label_mode != LabelMode::kNone) {
    r->label_col = static_cast<int>(specs.size());
    specs.push_back(example::FeatureSpec::VarLen(options.label_key, example::DType::kInt64));
  }
  if (!options.boxes_key.empty()) {
    r->boxes_col = static_cast<int>(specs.size());
    specs.push_back(example::FeatureSpec::VarLen(options.boxes_key, example::DType::kFloat32));
  }
  // An extra key that the recipe parses anyway (the label, say, passed through raw besides its
  // multi-hot form) reuses that column: the parser takes each key once.
  for (const auto& s : options.extra_keys) {
    int col = -1;
    for (size_t k = 0; k < specs.size(); ++k) {
      if (specs[k].key == s.key) col = static_cast<int>(k);
    }
    if (col >= 0 && (specs[static_cast<size_t>(col)].dtype != s.dtype ||
                     specs[static_cast<size_t>(col)].kind != s.kind)) {
      return InvalidArgumentError("extra key '" + s.key +
                                  "' is parsed by the recipe with another type or kind");
    }
    if (col < 0) {
      col = static_cast<int>(specs.size());
      specs.push_back(s);
    }
    r->extra_cols.push_back(col);
  }
  RF_ASSIGN_OR_RETURN(example::ExampleParser parser,
                      example::ExampleParser::Create(std::move(specs)));
  r->parser.emplace(std::move(parser));
  r->seed = options.seed ? *options.seed : std::random_device{}() * 0x100000001ull;
  r->skipped = std::make_shared<std::atomic<uint64_t>>(0);
  r->outputs = internal::BufferPool::Create(kIdleOutputBuffers, kSurplusOutputBuffers,
                                            kSurplusWindowBatches);
  r->o = std::move(options);
  pipeline::MapOp op;
  op.skipped = r->skipped;
  op.name = r->o.name;
  op.fn = [r](Element& e, const pipeline::MapContext& context) { return Run(*r, e, context); };
  op.splits_batches = true;
  op.elementwise = true;
  return op;
}

}  // namespace recordflow::vision
