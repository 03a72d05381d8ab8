// Bindings of the augmentation ops (recordflow/image/augment.h) as _core.augment, wrapped by
// recordflow.vision_functional. Images are HxWxC uint8 NumPy arrays; batches [B, H, W, C] uint8
// or float32. Pixel work runs without the GIL; random ops take a seed for their own generator.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "errors.h"
#include "image_array.h"
#include "recordflow/image/augment.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace recordflow::python {
namespace {

using image::Image;
using Range = std::optional<std::array<double, 2>>;

// Runs `fn(image) -> Result<Image>` on a copy of `a` without the GIL. The copy goes into a
// per-thread buffer that keeps its capacity: no allocation (and no fresh pages to fault in)
// per call once it has held the largest image.
template <typename Fn>
nb::object Run(const U8Array& a, Fn&& fn) {
  thread_local Image scratch;
  Image shape = ToImageShape(a);
  if (shape.width == 0 || shape.height == 0) throw nb::value_error("expected a non-empty image");
  scratch.width = shape.width;
  scratch.height = shape.height;
  scratch.channels = shape.channels;
  scratch.pixels.assign(a.data(), a.data() + scratch.row_bytes() * scratch.height);
  return ToArray(ValueOrThrow(WithoutGil([&] { return fn(static_cast<const Image&>(scratch)); })));
}

// Runs a pointwise `fn(in, out, n) -> Status` from `a`'s buffer straight into a new array of
// the same shape, without the GIL: no copy of the input and no zero-filled output, which for
// an op this cheap (invert, posterize, solarize) is most of the cost.
template <typename Fn>
nb::object RunPointwise(const U8Array& a, Fn&& fn) {
  Image shape = ToImageShape(a);
  const size_t n = shape.row_bytes() * static_cast<size_t>(shape.height);
  std::unique_ptr<uint8_t[]> out(new uint8_t[n]);  // default-initialised: no memset
  ThrowIfError(WithoutGil([&] { return fn(a.data(), out.get(), n); }));
  nb::capsule owner(out.get(), [](void* p) noexcept { delete[] static_cast<uint8_t*>(p); });
  uint8_t* data = out.release();
  size_t dims[3] = {static_cast<size_t>(shape.height), static_cast<size_t>(shape.width),
                    static_cast<size_t>(shape.channels)};
  return nb::cast(nb::ndarray<nb::numpy, uint8_t>(data, 3, dims, owner));
}

image::AffineInterpolation ParseAffineInterpolation(const std::string& name) {
  if (name == "nearest") return image::AffineInterpolation::kNearest;
  if (name == "bilinear") return image::AffineInterpolation::kBilinear;
  throw nb::value_error("interpolation: 'nearest' or 'bilinear'");
}

image::PolicyOptions Policy(const std::string& interpolation, std::vector<double> fill) {
  image::PolicyOptions o;
  o.interpolation = ParseAffineInterpolation(interpolation);
  o.fill = std::move(fill);
  return o;
}

nb::list OpsToList(const std::vector<image::AppliedOp>& ops) {
  nb::list out;
  for (const auto& op : ops) {
    out.append(nb::make_tuple(std::string(image::AugmentOpName(op.op)), op.magnitude));
  }
  return out;
}

// A new array of the shape and sample type of a batch array (uint8 or float32, [B, H, W, C]
// C-contiguous), not initialised: the batch ops read the input array (view.source) and write
// all of it (no copy of the batch first, none of it under the GIL).
struct BatchOutput {
  nb::object array;
  image::BatchView view;
};

template <typename T>
nb::object NewBatchArray(size_t n, const size_t (&shape)[4], T** data) {
  std::unique_ptr<T[]> owned(new T[n]);  // default-initialised: no zero fill
  nb::capsule owner(owned.get(), [](void* p) noexcept { delete[] static_cast<T*>(p); });
  *data = owned.release();
  return nb::cast(nb::ndarray<nb::numpy, T>(*data, 4, shape, owner));
}

BatchOutput NewBatchOutput(const nb::ndarray<nb::c_contig, nb::device::cpu>& a) {
  if (a.ndim() != 4) throw nb::value_error("expected a [B, H, W, C] batch");
  BatchOutput b;
  b.view.batch = static_cast<int>(a.shape(0));
  b.view.height = static_cast<int>(a.shape(1));
  b.view.width = static_cast<int>(a.shape(2));
  b.view.channels = static_cast<int>(a.shape(3));
  b.view.source = a.data();
  const size_t shape[4] = {a.shape(0), a.shape(1), a.shape(2), a.shape(3)};
  const size_t n = std::max<size_t>(a.size(), 1);
  if (a.dtype() == nb::dtype<uint8_t>()) {
    b.array = NewBatchArray(n, shape, &b.view.u8);
  } else if (a.dtype() == nb::dtype<float>()) {
    b.array = NewBatchArray(n, shape, &b.view.f32);
  } else {
    throw nb::type_error("batch must be uint8 or float32");
  }
  return b;
}

nb::object SoftLabels(std::vector<float>&& soft, int batch, int num_classes) {
  auto* owned = new std::vector<float>(std::move(soft));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
  size_t shape[2] = {static_cast<size_t>(batch), static_cast<size_t>(num_classes)};
  return nb::cast(nb::ndarray<nb::numpy, float>(owned->data(), 2, shape, owner));
}

using LabelArray = nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

}  // namespace

void RegisterAugment(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("augment", "torchvision v2 augmentation ops (native)");

  // The ops of one image and one factor: one binding each, from this table.
  // (The photometric ops take their image by value and work in its buffer; sharpness, which
  // reads the original rows while it writes, takes it by reference.)
  using FactorOp = Result<Image> (*)(Image, double);
  static constexpr std::pair<const char*, FactorOp> kFactorOps[] = {
      {"adjust_brightness", &image::AdjustBrightness},
      {"adjust_contrast", &image::AdjustContrast},
      {"adjust_saturation", &image::AdjustSaturation},
      {"adjust_hue", &image::AdjustHue},
      {"adjust_sharpness",
       [](Image i, double f) -> Result<Image> { return image::AdjustSharpness(i, f); }},
  };
  for (const auto& entry : kFactorOps) {
    const FactorOp op = entry.second;
    m.def(entry.first,
          [op](U8Array a, double f) { return Run(a, [&](const Image& i) { return op(i, f); }); });
  }
  m.def("rgb_to_grayscale", [](U8Array a, int n) {
    return Run(a, [&](const Image& i) { return image::RgbToGrayscale(i, n); });
  });
  m.def("posterize", [](U8Array a, int bits) {
    return RunPointwise(a, [&](const uint8_t* in, uint8_t* out, size_t n) {
      return image::PosterizeSamples(in, out, n, bits);
    });
  });
  m.def("solarize", [](U8Array a, double t) {
    return RunPointwise(a, [&](const uint8_t* in, uint8_t* out, size_t n) {
      return image::SolarizeSamples(in, out, n, t);
    });
  });
  m.def("invert", [](U8Array a) {
    return RunPointwise(a, [](const uint8_t* in, uint8_t* out, size_t n) {
      image::InvertSamples(in, out, n);
      return Status::OK();
    });
  });
  m.def("autocontrast", [](U8Array a) {
    return Run(a, [](const Image& i) -> Result<Image> { return image::AutoContrast(i); });
  });
  m.def("equalize", [](U8Array a) {
    return Run(a, [](const Image& i) -> Result<Image> { return image::Equalize(i); });
  });
  m.def("gaussian_blur", [](U8Array a, std::array<int, 2> k, std::array<double, 2> s) {
    return Run(a, [&](const Image& i) { return image::GaussianBlur(i, k, s); });
  });
  m.def("erase", [](U8Array a, std::array<int, 4> rect, std::vector<double> value) {
    return Run(a, [&](const Image& i) {
      return image::Erase(i, image::Rect{rect[0], rect[1], rect[2], rect[3]}, value);
    });
  });
  m.def(
      "affine",
      [](U8Array a, double angle, std::array<double, 2> translate, double scale,
         std::array<double, 2> shear, const std::string& interpolation, std::vector<double> fill,
         std::optional<std::array<double, 2>> center) {
        image::AffineOptions o;
        o.angle = angle;
        o.translate = translate;
        o.scale = scale;
        o.shear = shear;
        o.interpolation = ParseAffineInterpolation(interpolation);
        o.fill = std::move(fill);
        o.center = center;
        return Run(a, [&](const Image& i) { return image::Affine(i, o); });
      },
      "image"_a, "angle"_a, "translate"_a, "scale"_a, "shear"_a, "interpolation"_a, "fill"_a,
      "center"_a = nb::none());
  m.def("rotate",
        [](U8Array a, double angle, const std::string& interpolation, std::vector<double> fill) {
          const auto mode = ParseAffineInterpolation(interpolation);
          return Run(a, [&](const Image& i) { return image::Rotate(i, angle, mode, fill); });
        });

  m.def("color_jitter", [](U8Array a, Range b, Range c, Range s, Range h, uint64_t seed) {
    image::ColorJitterOptions o;
    o.brightness = b;
    o.contrast = c;
    o.saturation = s;
    o.hue = h;
    return Run(a, [&](const Image& i) {
      image::Rng rng(seed);
      return image::ColorJitter(i, o, rng);
    });
  });
  m.def("random_grayscale", [](U8Array a, double p, uint64_t seed) {
    return Run(a, [&](const Image& i) {
      image::Rng rng(seed);
      return image::RandomGrayscale(i, p, rng);
    });
  });
  m.def("random_gaussian_blur",
        [](U8Array a, std::array<int, 2> k, std::array<double, 2> sigma, uint64_t seed) {
          image::GaussianBlurOptions o;
          o.kernel_size = k;
          o.sigma = sigma;
          return Run(a, [&](const Image& i) {
            image::Rng rng(seed);
            return image::RandomGaussianBlur(i, o, rng);
          });
        });
  m.def("random_erasing",
        [](U8Array a, double p, std::array<double, 2> scale, std::array<double, 2> ratio,
           std::vector<double> value, uint64_t seed) {
          image::RandomErasingOptions o;
          o.p = p;
          o.scale = scale;
          o.ratio = ratio;
          o.value = std::move(value);
          return Run(a, [&](const Image& i) {
            image::Rng rng(seed);
            return image::RandomErasing(i, o, rng);
          });
        });

  m.def("apply_op", [](U8Array a, const std::string& name, double magnitude,
                       const std::string& interpolation, std::vector<double> fill) {
    const image::AppliedOp op{ValueOrThrow(image::ParseAugmentOp(name)), magnitude};
    const image::PolicyOptions o = Policy(interpolation, std::move(fill));
    return Run(a, [&](const Image& i) { return image::ApplyAugmentOp(i, op, o); });
  });
  // The (op, magnitude) list a policy draws for a width x height image from `seed`.
  m.def("sample_policy", [](const std::string& policy, int width, int height, uint64_t seed,
                            int num_ops, int magnitude, int num_magnitude_bins) {
    image::Rng rng(seed);
    if (policy == "auto_augment") {
      return OpsToList(ValueOrThrow(image::SampleAutoAugment(width, height, rng)));
    }
    if (policy == "rand_augment") {
      return OpsToList(ValueOrThrow(
          image::SampleRandAugment(width, height, {num_ops, magnitude, num_magnitude_bins}, rng)));
    }
    if (policy == "trivial_augment_wide") {
      return OpsToList(
          ValueOrThrow(image::SampleTrivialAugmentWide(width, height, {num_magnitude_bins}, rng)));
    }
    throw nb::value_error("policy: auto_augment, rand_augment or trivial_augment_wide");
  });
  m.def("policy", [](U8Array a, const std::string& policy, uint64_t seed, int num_ops,
                     int magnitude, int num_magnitude_bins, const std::string& interpolation,
                     std::vector<double> fill) {
    const image::PolicyOptions o = Policy(interpolation, std::move(fill));
    if (policy != "auto_augment" && policy != "rand_augment" && policy != "trivial_augment_wide") {
      throw nb::value_error("policy: auto_augment, rand_augment or trivial_augment_wide");
    }
    return Run(a, [&](const Image& i) -> Result<Image> {
      image::Rng rng(seed);
      if (policy == "auto_augment") return image::AutoAugment(i, o, rng);
      if (policy == "rand_augment") {
        return image::RandAugment(i, {num_ops, magnitude, num_magnitude_bins}, o, rng);
      }
      return image::TrivialAugmentWide(i, {num_magnitude_bins}, o, rng);
    });
  });

  // (mixed batch, soft labels [B, num_classes], lambda). lam given: that lambda; else drawn
  // from Beta(alpha, alpha) with `seed`.
  m.def("mixup", [](nb::ndarray<nb::c_contig, nb::device::cpu> batch, LabelArray labels,
                    int num_classes, double alpha, std::optional<double> lam, uint64_t seed) {
    BatchOutput b = NewBatchOutput(batch);
    const std::span<const int64_t> l(labels.data(), labels.size());
    std::vector<float> soft(static_cast<size_t>(b.view.batch) *
                            static_cast<size_t>(std::max(num_classes, 0)));
    const double value = ValueOrThrow(WithoutGil([&]() -> Result<double> {
      if (lam) {
        RF_RETURN_IF_ERROR(image::MixUpWithLambda(b.view, l, num_classes, *lam, soft));
        return *lam;
      }
      image::Rng rng(seed);
      return image::MixUp(b.view, l, num_classes, alpha, soft, rng);
    }));
    return nb::make_tuple(b.array, SoftLabels(std::move(soft), b.view.batch, num_classes), value);
  });
  // (mixed batch, soft labels, lambda, (x, y, w, h)). box given: that box; else drawn.
  m.def("cutmix",
        [](nb::ndarray<nb::c_contig, nb::device::cpu> batch, LabelArray labels, int num_classes,
           double alpha, std::optional<std::array<int, 4>> box, uint64_t seed) {
          BatchOutput b = NewBatchOutput(batch);
          const std::span<const int64_t> l(labels.data(), labels.size());
          std::vector<float> soft(static_cast<size_t>(b.view.batch) *
                                  static_cast<size_t>(std::max(num_classes, 0)));
          image::Rect r;
          ThrowIfError(WithoutGil([&] {
            if (box) {
              r = image::Rect{(*box)[0], (*box)[1], (*box)[2], (*box)[3]};
            } else if (!(alpha > 0)) {
              return InvalidArgumentError("cutmix: alpha must be positive");
            } else {
              image::Rng rng(seed);
              const double lam = image::SampleBeta(alpha, rng);
              r = image::CutMixBox(b.view.width, b.view.height, lam, rng);
            }
            return image::CutMixWithBox(b.view, l, num_classes, r, soft);
          }));
          const double lam = 1.0 - static_cast<double>(r.width) * r.height /
                                       (static_cast<double>(b.view.width) * b.view.height);
          return nb::make_tuple(b.array, SoftLabels(std::move(soft), b.view.batch, num_classes),
                                lam, nb::make_tuple(r.x, r.y, r.width, r.height));
        });
}

}  // namespace recordflow::python
