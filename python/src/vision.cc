// Bindings for the image ops and the vision presets. Arrays in and out are HWC uint8 NumPy
// arrays (float32 / float16 / uint16-as-bfloat16 for normalize); all pixel work runs without
// the GIL.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "columns.h"
#include "errors.h"
#include "image_array.h"
#include "native_op.h"
#include "recordflow/image/ops.h"
#include "recordflow/vision/compose.h"
#include "recordflow/vision/vision.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace recordflow::python {
namespace {

using image::Image;

std::span<const std::byte> BytesSpan(nb::bytes b) {
  return std::as_bytes(std::span(b.c_str(), b.size()));
}

nb::object ToArray16(image::Image16&& img) {
  return PixelsToArray(std::move(img.pixels), img.height, img.width, img.channels);
}

vision::CommonOptions Common(int size, const std::string& image_key, const std::string& label_key,
                             std::array<float, 3> mean, std::array<float, 3> std,
                             const std::string& dtype, const std::string& layout,
                             const std::string& interpolation, bool dct_scaling,
                             uint64_t max_pixels, const std::string& on_corruption,
                             std::optional<int64_t> default_label) {
  vision::CommonOptions c;
  c.size = size;
  c.image_key = image_key;
  c.label_key = label_key;
  c.mean = mean;
  c.std = std;
  c.dtype = ValueOrThrow(image::ParseTensorType(dtype));
  c.layout = ValueOrThrow(image::ParseLayout(layout));
  c.interpolation = ValueOrThrow(image::ParseInterpolation(interpolation));
  c.dct_scaling = dct_scaling;
  c.max_pixels = max_pixels;
  c.on_corruption = ValueOrThrow(format::ParseCorruptionPolicy(on_corruption));
  c.default_label = default_label;
  return c;
}

std::array<uint8_t, 3> Fill(nb::handle h) {
  std::array<int, 3> v = nb::cast<std::array<int, 3>>(h);
  std::array<uint8_t, 3> out{};
  for (int i = 0; i < 3; ++i) {
    if (v[i] < 0 || v[i] > 255) throw nb::value_error("fill must be in 0..255");
    out[i] = static_cast<uint8_t>(v[i]);
  }
  return out;
}

// One op of an rf.vision recipe: (name, parameters) as rf.vision's op classes give them.
vision::OpSpec ToOpSpec(const std::string& name, nb::dict d) {
  auto interp = [&]() {
    return ValueOrThrow(image::ParseInterpolation(nb::cast<std::string>(d["interpolation"])));
  };
  if (name == "RandomResizedCrop") {
    vision::RandomResizedCropOp o;
    o.height = nb::cast<int>(d["height"]);
    o.width = nb::cast<int>(d["width"]);
    auto sc = nb::cast<std::array<double, 2>>(d["scale"]);
    auto ra = nb::cast<std::array<double, 2>>(d["ratio"]);
    o.crop.scale = sc;
    o.crop.ratio = ra;
    o.interpolation = interp();
    o.antialias = nb::cast<bool>(d["antialias"]);
    return o;
  }
  if (name == "Resize") {
    vision::ResizeOp o;
    o.shorter = nb::cast<int>(d["shorter"]);
    o.height = nb::cast<int>(d["height"]);
    o.width = nb::cast<int>(d["width"]);
    o.max_size = nb::cast<std::optional<int>>(d["max_size"]);
    o.interpolation = interp();
    o.antialias = nb::cast<bool>(d["antialias"]);
    return o;
  }
  if (name == "CenterCrop")
    return vision::CenterCropOp{nb::cast<int>(d["height"]), nb::cast<int>(d["width"])};
  if (name == "Pad") {
    vision::PadOp o;
    auto p = nb::cast<std::array<int, 4>>(d["padding"]);
    o.left = p[0];
    o.top = p[1];
    o.right = p[2];
    o.bottom = p[3];
    o.fill = Fill(d["fill"]);
    o.mode = ValueOrThrow(vision::ParsePadMode(nb::cast<std::string>(d["padding_mode"])));
    return o;
  }
  if (name == "RandomHorizontalFlip")
    return vision::RandomHorizontalFlipOp{nb::cast<double>(d["p"])};
  if (name == "RandomVerticalFlip") return vision::RandomVerticalFlipOp{nb::cast<double>(d["p"])};
  if (name == "RandomRotation") {
    vision::RandomRotationOp o;
    auto deg = nb::cast<std::array<double, 2>>(d["degrees"]);
    o.min_degrees = deg[0];
    o.max_degrees = deg[1];
    o.interpolation = interp();
    o.expand = nb::cast<bool>(d["expand"]);
    o.fill = Fill(d["fill"]);
    if (d.contains("center") && !d["center"].is_none()) {
      o.center = nb::cast<std::array<double, 2>>(d["center"]);
    }
    return o;
  }
  if (name == "Rotate90") return vision::Rotate90Op{nb::cast<int>(d["k"])};
  if (name == "ToDtype") {
    return vision::ToDtypeOp{
        ValueOrThrow(image::ParseTensorType(nb::cast<std::string>(d["dtype"]))),
        nb::cast<bool>(d["scale"])};
  }
  if (name == "Normalize") {
    return vision::NormalizeOp{nb::cast<std::array<float, 3>>(d["mean"]),
                               nb::cast<std::array<float, 3>>(d["std"])};
  }
  auto range = [&](const char* key) -> std::optional<std::array<double, 2>> {
    return nb::cast<std::optional<std::array<double, 2>>>(d[key]);
  };
  auto policy = [&]() {
    image::PolicyOptions p;
    p.interpolation = nb::cast<std::string>(d["interpolation"]) == "bilinear"
                          ? image::AffineInterpolation::kBilinear
                          : image::AffineInterpolation::kNearest;
    p.fill = nb::cast<std::vector<double>>(d["fill"]);
    return p;
  };
  if (name == "ColorJitter") {
    vision::ColorJitterOp o;
    o.options.brightness = range("brightness");
    o.options.contrast = range("contrast");
    o.options.saturation = range("saturation");
    o.options.hue = range("hue");
    return o;
  }
  if (name == "RandomGrayscale") return vision::RandomGrayscaleOp{nb::cast<double>(d["p"])};
  if (name == "Grayscale") return vision::GrayscaleOp{};
  if (name == "GaussianBlur") {
    vision::GaussianBlurOp o;
    o.options.kernel_size = nb::cast<std::array<int, 2>>(d["kernel_size"]);
    o.options.sigma = nb::cast<std::array<double, 2>>(d["sigma"]);
    return o;
  }
  if (name == "RandomErasing") {
    vision::RandomErasingOp o;
    o.options.p = nb::cast<double>(d["p"]);
    o.options.scale = nb::cast<std::array<double, 2>>(d["scale"]);
    o.options.ratio = nb::cast<std::array<double, 2>>(d["ratio"]);
    if (nb::isinstance<nb::str>(d["value"])) {
      o.random_value = true;  // "random" (checked in Python); resolved by vision::Compose
    } else {
      o.options.value = nb::cast<std::vector<double>>(d["value"]);
    }
    return o;
  }
  if (name == "RandomInvert") return vision::RandomInvertOp{nb::cast<double>(d["p"])};
  if (name == "RandomPosterize") {
    return vision::RandomPosterizeOp{nb::cast<int>(d["bits"]), nb::cast<double>(d["p"])};
  }
  if (name == "RandomSolarize") {
    return vision::RandomSolarizeOp{nb::cast<double>(d["threshold"]), nb::cast<double>(d["p"])};
  }
  if (name == "RandomAdjustSharpness") {
    return vision::RandomAdjustSharpnessOp{nb::cast<double>(d["sharpness_factor"]),
                                           nb::cast<double>(d["p"])};
  }
  if (name == "RandomAutocontrast") return vision::RandomAutocontrastOp{nb::cast<double>(d["p"])};
  if (name == "RandomEqualize") return vision::RandomEqualizeOp{nb::cast<double>(d["p"])};
  if (name == "RandomAffine") {
    vision::RandomAffineOp o;
    o.degrees = nb::cast<std::array<double, 2>>(d["degrees"]);
    o.translate = range("translate");
    o.scale = range("scale");
    o.shear = nb::cast<std::array<double, 4>>(d["shear"]);
    o.interpolation = nb::cast<std::string>(d["interpolation"]) == "bilinear"
                          ? image::AffineInterpolation::kBilinear
                          : image::AffineInterpolation::kNearest;
    o.fill = nb::cast<std::vector<double>>(d["fill"]);
    if (!d["center"].is_none()) o.center = nb::cast<std::array<double, 2>>(d["center"]);
    return o;
  }
  if (name == "AutoAugment") return vision::AutoAugmentOp{policy()};
  if (name == "RandAugment") {
    vision::RandAugmentOp o;
    o.rand.num_ops = nb::cast<int>(d["num_ops"]);
    o.rand.magnitude = nb::cast<int>(d["magnitude"]);
    o.rand.num_magnitude_bins = nb::cast<int>(d["num_magnitude_bins"]);
    o.options = policy();
    return o;
  }
  if (name == "TrivialAugmentWide") {
    vision::TrivialAugmentWideOp o;
    o.trivial.num_magnitude_bins = nb::cast<int>(d["num_magnitude_bins"]);
    o.options = policy();
    return o;
  }
  throw nb::value_error(("unknown rf.vision op '" + name + "'").c_str());
}

}  // namespace

void RegisterVision(nb::module_& m) {
  nb::class_<NativeMapOp>(m, "NativeMapOp")
      .def_ro("name", &NativeMapOp::name)
      .def_prop_ro("skipped_records", [](const NativeMapOp& op) { return op.skipped_records(); });

  m.def(
      "imagenet_train",
      [](int size, const std::string& image_key, const std::string& label_key,
         std::pair<double, double> scale, std::pair<double, double> ratio, double flip_probability,
         std::array<float, 3> mean, std::array<float, 3> std, const std::string& dtype,
         const std::string& layout, const std::string& interpolation, std::optional<uint64_t> seed,
         bool dct_scaling, uint64_t max_pixels, const std::string& on_corruption,
         std::optional<int64_t> default_label) {
        vision::ImagenetTrainOptions o;
        static_cast<vision::CommonOptions&>(o) =
            Common(size, image_key, label_key, mean, std, dtype, layout, interpolation, dct_scaling,
                   max_pixels, on_corruption, default_label);
        o.crop.scale = {scale.first, scale.second};
        o.crop.ratio = {ratio.first, ratio.second};
        o.flip_probability = flip_probability;
        o.seed = seed;
        return NativeMapOp(ValueOrThrow(vision::ImagenetTrain(o)));
      },
      "size"_a, "image_key"_a, "label_key"_a, "scale"_a, "ratio"_a, "flip_probability"_a, "mean"_a,
      "std"_a, "dtype"_a, "layout"_a, "interpolation"_a, "seed"_a.none(), "dct_scaling"_a,
      "max_pixels"_a, "on_corruption"_a, "default_label"_a.none());

  m.def(
      "imagenet_eval",
      [](int size, int resize, const std::string& image_key, const std::string& label_key,
         std::array<float, 3> mean, std::array<float, 3> std, const std::string& dtype,
         const std::string& layout, const std::string& interpolation, bool dct_scaling,
         uint64_t max_pixels, const std::string& on_corruption,
         std::optional<int64_t> default_label) {
        vision::ImagenetEvalOptions o;
        static_cast<vision::CommonOptions&>(o) =
            Common(size, image_key, label_key, mean, std, dtype, layout, interpolation, dct_scaling,
                   max_pixels, on_corruption, default_label);
        o.resize = resize;
        return NativeMapOp(ValueOrThrow(vision::ImagenetEval(o)));
      },
      "size"_a, "resize"_a, "image_key"_a, "label_key"_a, "mean"_a, "std"_a, "dtype"_a, "layout"_a,
      "interpolation"_a, "dct_scaling"_a, "max_pixels"_a, "on_corruption"_a,
      "default_label"_a.none());

  // A recipe of ops -> (op, output height, output width).
  m.def(
      "compose",
      [](nb::list ops, const std::string& image_key, const std::string& label_key,
         const std::string& label_mode, int num_classes, std::optional<int64_t> default_label,
         nb::list extra_specs, const std::string& boxes_key, bool boxes_normalized,
         const std::string& layout, std::optional<uint64_t> seed, bool dct_scaling,
         uint64_t max_pixels, const std::string& on_corruption, const std::string& name,
         const std::string& batch_mix, double mix_alpha, int mix_classes) {
        vision::RecipeOptions o;
        if (batch_mix == "MixUp") {
          o.batch_mix.kind = vision::BatchMixKind::kMixUp;
        } else if (batch_mix == "CutMix") {
          o.batch_mix.kind = vision::BatchMixKind::kCutMix;
        }
        o.batch_mix.alpha = mix_alpha;
        o.batch_mix.num_classes = mix_classes;
        for (nb::handle h : ops) {
          nb::tuple t = nb::cast<nb::tuple>(h);
          o.ops.push_back(ToOpSpec(nb::cast<std::string>(t[0]), nb::cast<nb::dict>(t[1])));
        }
        o.image_key = image_key;
        o.label_key = label_key;
        if (label_mode == "none") {
          o.label_mode = vision::LabelMode::kNone;
        } else if (label_mode == "int") {
          o.label_mode = vision::LabelMode::kInt;
        } else if (label_mode == "multi_hot") {
          o.label_mode = vision::LabelMode::kMultiHot;
        } else if (label_mode == "padded") {
          o.label_mode = vision::LabelMode::kPadded;
        } else {
          throw nb::value_error("label_mode must be int, multi_hot or padded");
        }
        o.num_classes = num_classes;
        o.default_label = default_label;
        o.extra_keys = ToSpecs(extra_specs);
        o.boxes_key = boxes_key;
        o.boxes_normalized = boxes_normalized;
        o.layout = ValueOrThrow(image::ParseLayout(layout));
        o.seed = seed;
        o.dct_scaling = dct_scaling;
        o.max_pixels = max_pixels;
        o.on_corruption = ValueOrThrow(format::ParseCorruptionPolicy(on_corruption));
        o.name = name;
        auto hw = ValueOrThrow(vision::OutputSize(o.ops));
        return nb::make_tuple(NativeMapOp(ValueOrThrow(vision::Compose(std::move(o)))), hw[0],
                              hw[1]);
      },
      "ops"_a, "image_key"_a, "label_key"_a, "label_mode"_a, "num_classes"_a,
      "default_label"_a.none(), "extra_specs"_a, "boxes_key"_a, "boxes_normalized"_a, "layout"_a,
      "seed"_a.none(), "dct_scaling"_a, "max_pixels"_a, "on_corruption"_a, "name"_a, "batch_mix"_a,
      "mix_alpha"_a, "mix_classes"_a);

  // channels: 0 (as stored), 1, 3 or 4; sixteen: uint16 samples (TF's dtype=tf.uint16).
  m.def(
      "decode_image",
      [](nb::bytes data, uint64_t max_pixels, int channels, bool sixteen, int max_scans) {
        image::DecodeOptions o;
        o.desired_channels = channels;
        o.max_pixels = max_pixels;
        o.max_scans = max_scans;
        const std::span<const std::byte> bytes = BytesSpan(data);  // a C-API call: GIL held
        if (sixteen) {
          return ToArray16(ValueOrThrow(WithoutGil([&] { return image::Decode16(bytes, o); })));
        }
        return ToArray(ValueOrThrow(WithoutGil([&] {
          return channels == 3 ? image::DecodeImageRgb(bytes, max_pixels, max_scans)
                               : image::Decode(bytes, o);
        })));
      },
      "data"_a, "max_pixels"_a = uint64_t{1} << 28, "channels"_a = 3, "sixteen"_a = false,
      "max_scans"_a = image::kDefaultMaxScans);

  // (pixels, (box x, y, w, h), scale_denom)
  m.def(
      "decode_region",
      [](nb::bytes data, std::optional<std::tuple<int, int, int, int>> crop, int target_width,
         int target_height, bool dct_scaling, bool fancy_upsampling, uint64_t max_pixels,
         int max_scans) {
        image::RegionDecodeOptions o;
        if (crop) {
          o.crop = image::Rect{std::get<0>(*crop), std::get<1>(*crop), std::get<2>(*crop),
                               std::get<3>(*crop)};
        }
        o.target_width = target_width;
        o.target_height = target_height;
        o.dct_scaling = dct_scaling;
        o.fancy_upsampling = fancy_upsampling;
        o.max_pixels = max_pixels;
        o.max_scans = max_scans;
        image::DecodedRegion region;
        const std::span<const std::byte> bytes = BytesSpan(data);  // a C-API call: GIL held
        ThrowIfError(WithoutGil([&] {
          thread_local image::ImageDecoder decoder;
          return decoder.DecodeRegion(bytes, o, &region);
        }));
        const image::Box b = region.box;
        return nb::make_tuple(ToArray(std::move(region.image)),
                              nb::make_tuple(b.x, b.y, b.width, b.height), region.scale_denom);
      },
      "data"_a, "crop"_a = nb::none(), "target_width"_a = 0, "target_height"_a = 0,
      "dct_scaling"_a = true, "fancy_upsampling"_a = true, "max_pixels"_a = uint64_t{1} << 28,
      "max_scans"_a = image::kDefaultMaxScans);

  m.def(
      "resize",
      [](U8Array a, int width, int height, const std::string& interpolation,
         std::optional<std::tuple<double, double, double, double>> box) {
        Image img = ToImage(a);
        const image::Interpolation mode = ValueOrThrow(image::ParseInterpolation(interpolation));
        image::Box b;
        if (box) b = {std::get<0>(*box), std::get<1>(*box), std::get<2>(*box), std::get<3>(*box)};
        return ToArray(ValueOrThrow(WithoutGil(
            [&] { return image::Resample(img, width, height, mode, box ? &b : nullptr); })));
      },
      "image"_a, "width"_a, "height"_a, "interpolation"_a = "bilinear", "box"_a = nb::none());

  m.def(
      "center_crop",
      [](U8Array a, int width, int height) {
        return ToArray(ValueOrThrow(image::CenterCrop(ToImage(a), width, height)));
      },
      "image"_a, "width"_a, "height"_a);

  m.def(
      "flip_left_right", [](U8Array a) { return ToArray(image::FlipLeftRight(ToImage(a))); },
      "image"_a);

  // uint8 HWC RGB -> (bytes of the output, shape); the Python side views them with the dtype.
  m.def(
      "normalize",
      [](U8Array a, std::array<float, 3> mean, std::array<float, 3> std, const std::string& dtype,
         const std::string& layout, bool flip) {
        Image img = ToImage(a);
        if (img.channels != 3) throw nb::value_error("normalize takes an HxWx3 array");
        image::NormalizeOptions o;
        o.mean = mean;
        o.std = std;
        o.type = ValueOrThrow(image::ParseTensorType(dtype));
        o.layout = ValueOrThrow(image::ParseLayout(layout));
        o.flip = flip;
        std::vector<float> f(img.pixels.begin(), img.pixels.end());
        std::string out(f.size() * DTypeSize(o.type), '\0');
        ThrowIfError(WithoutGil([&] {
          return image::NormalizeInto(f, img.width, img.height, o,
                                      std::as_writable_bytes(std::span(out.data(), out.size())));
        }));
        return nb::bytes(out.data(), out.size());
      },
      "image"_a, "mean"_a, "std"_a, "dtype"_a = "float32", "layout"_a = "HWC", "flip"_a = false);

  // n crops (x, y, w, h) drawn for a width x height image from `seed`, as one flat list.
  m.def(
      "random_resized_crop_params",
      [](int width, int height, uint64_t seed, int n, std::pair<double, double> scale,
         std::pair<double, double> ratio) {
        image::RandomResizedCropOptions o;
        o.scale = {scale.first, scale.second};
        o.ratio = {ratio.first, ratio.second};
        image::Rng rng(seed);
        std::vector<int64_t> out;
        out.reserve(static_cast<size_t>(n) * 4);
        for (int i = 0; i < n; ++i) {
          const image::Rect r = image::RandomResizedCropRect(width, height, o, rng);
          out.insert(out.end(), {r.x, r.y, r.width, r.height});
        }
        auto* owned = new std::vector<int64_t>(std::move(out));
        nb::capsule owner(owned,
                          [](void* p) noexcept { delete static_cast<std::vector<int64_t>*>(p); });
        size_t shape[2] = {static_cast<size_t>(n), 4};
        return nb::cast(nb::ndarray<nb::numpy, int64_t>(owned->data(), 2, shape, owner));
      },
      "width"_a, "height"_a, "seed"_a, "n"_a, "scale"_a, "ratio"_a);

  m.def("kernel_backend", [] { return std::string(image::KernelBackendName()); });
  m.def(
      "set_kernel_backend",
      [](const std::string& name) {
        image::KernelBackend b = image::KernelBackend::kAuto;
        if (name == "scalar")
          b = image::KernelBackend::kScalar;
        else if (name == "sse2")
          b = image::KernelBackend::kSse2;
        else if (name == "avx2")
          b = image::KernelBackend::kAvx2;
        else if (name != "auto")
          throw nb::value_error("backend: auto, scalar, sse2 or avx2");
        ThrowIfError(image::SetKernelBackend(b));
      },
      "name"_a);
}

}  // namespace recordflow::python
