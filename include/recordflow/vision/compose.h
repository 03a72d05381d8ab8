// Composable native image ops: a recipe (a list of typed op specs named and parameterised as
// torchvision.transforms.v2) compiled into ONE pipeline::MapOp.
//
// The op parses the image (and the label and extra keys), decodes, applies the ops to each
// record with its own generator seeded by ElementSeed(seed, file, record index, epoch), and
// writes one batched tensor. It spreads a batch over MapContext::threads like the presets
// (which are recipes: vision.h).
//
// Fusion: a RandomResizedCrop first in the recipe, or Resize(shorter side) + CenterCrop first,
// is decoded as one region (only the crop's rows and iMCU columns, DCT-scaled when it shrinks
// by 2x or more) and resampled once; a RandomHorizontalFlip right after it and the final
// ToDtype / Normalize are folded into that resample (the preset's path, bit for bit). Any
// other op works on the 8-bit RGB image (as torchvision does on a uint8 tensor): a resample
// that is not fused is rounded to 8 bits, as torchvision's uint8 Resize is.
//
// The output size must be the same for every record: the recipe must end (before ToDtype /
// Normalize) with a size it fixes (RandomResizedCrop, CenterCrop, Resize((h, w)), or a fixed
// size followed by Pad / flips / rotations that keep it known); otherwise kInvalidArgument.
//
// Boxes (RecipeOptions::boxes_key, xyxy, normalized or pixel) follow every geometric op:
// crops translate and clip them, resizes scale them, flips mirror them, rotations take the
// box around the rotated corners (clipped). Boxes are never dropped (so per-box labels passed
// as extra keys stay aligned): a box left empty by clipping is kept with zero width or height
// and its entry in the mask column "<boxes_output>_mask" (int64 0/1 per box) is 0.
//
// Errors (messages name the record: file index, record index and byte offset): as the presets
// (ImageDecoder's, kResourceExhausted above max_pixels, the parser's), kInvalidArgument for a
// boxes feature whose length is not a multiple of 4 or a multi-label class outside
// [0, num_classes). With on_corruption = kSkip, records whose image fails to decode are
// dropped from the batch (all outputs, extra keys included) and counted.
//
// Thread safety: the MapFn is thread-safe. Lifetime: it owns its options; copies share them.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "recordflow/core/status.h"
#include "recordflow/example/parse.h"
#include "recordflow/format/record_reader.h"
#include "recordflow/image/augment.h"
#include "recordflow/image/ops.h"
#include "recordflow/pipeline/dataset.h"

namespace recordflow::vision {

// torchvision.transforms.v2.RandomResizedCrop(size, scale, ratio, interpolation, antialias).
struct RandomResizedCropOp {
  int height = 224;
  int width = 224;
  image::RandomResizedCropOptions crop;
  image::Interpolation interpolation = image::Interpolation::kBilinear;
  bool antialias = true;
};

// torchvision.transforms.v2.Resize: `shorter` > 0 (size=int: the shorter side becomes
// `shorter`, the longer int(shorter * long / short), capped by max_size) or height x width.
struct ResizeOp {
  int shorter = 0;
  int height = 0;
  int width = 0;
  std::optional<int> max_size;
  image::Interpolation interpolation = image::Interpolation::kBilinear;
  bool antialias = true;
};

// torchvision.transforms.v2.CenterCrop: offsets round((W - w) / 2); an image smaller than the
// crop is padded with zeros first (as torchvision).
struct CenterCropOp {
  int height = 224;
  int width = 224;
};

enum class PadMode : uint8_t { kConstant, kEdge, kReflect, kSymmetric };
Result<PadMode> ParsePadMode(std::string_view name);  // "constant", "edge", "reflect", "symmetric"

// torchvision.transforms.v2.Pad (left, top, right, bottom).
struct PadOp {
  int left = 0, top = 0, right = 0, bottom = 0;
  std::array<uint8_t, 3> fill = {0, 0, 0};
  PadMode mode = PadMode::kConstant;
};

struct RandomHorizontalFlipOp {
  double p = 0.5;
};
struct RandomVerticalFlipOp {
  double p = 0.5;
};

// torchvision.transforms.v2.RandomRotation: angle uniform in [min_degrees, max_degrees],
// counter-clockwise, about the image center; nearest or bilinear; `expand` grows the output to
// hold the whole rotated image; pixels from outside are `fill`.
struct RandomRotationOp {
  double min_degrees = 0;
  double max_degrees = 0;
  image::Interpolation interpolation = image::Interpolation::kNearest;
  bool expand = false;
  std::array<uint8_t, 3> fill = {0, 0, 0};
  // The rotation's center (x, y) in pixels from the top-left corner; none: the image center.
  std::optional<std::array<double, 2>> center;
};

// k quarter turns counter-clockwise (torch.rot90(img, k, dims=(-2, -1)); exact).
struct Rotate90Op {
  int k = 1;
};

// torchvision.transforms.v2.ToDtype(dtype, scale): the output dtype. uint8 with scale=false or
// true is the pixels; float with scale=true is pixel / 255, scale=false the pixel value.
struct ToDtypeOp {
  image::TensorType dtype = image::TensorType::kFloat32;
  bool scale = true;
};

// torchvision.transforms.v2.Normalize(mean, std) on the scaled float image.
struct NormalizeOp {
  std::array<float, 3> mean = {0.485f, 0.456f, 0.406f};
  std::array<float, 3> std = {0.229f, 0.224f, 0.225f};
};

// Photometric ops and policies on the 8-bit image (the kernels of image/augment.h, torchvision
// v2 semantics); boxes are unchanged by them. RandomErasing works on the 8-bit pixels too, so it
// comes before ToDtype / Normalize, with `value` in pixel units (0..255).
struct ColorJitterOp {
  image::ColorJitterOptions options;
};
struct RandomGrayscaleOp {
  double p = 0.1;
};
struct GrayscaleOp {};  // 3 output channels (the tensor is RGB)
struct GaussianBlurOp {
  image::GaussianBlurOptions options;
};
struct RandomErasingOp {
  image::RandomErasingOptions options;
  // torchvision's value="random": N(0, 1) in the normalized domain. Compose resolves it into
  // options.random_mean / random_std from the Normalize (and ToDtype scale) that follow, and
  // refuses a recipe with no Normalize after it.
  bool random_value = false;
};
// torchvision.transforms.v2's RandomInvert, RandomPosterize(bits), RandomSolarize(threshold),
// RandomAdjustSharpness(sharpness_factor), RandomAutocontrast and RandomEqualize: the kernel,
// applied with probability p (one uniform draw per record, as torchvision's rand(1) < p).
struct RandomInvertOp {
  double p = 0.5;
};
struct RandomPosterizeOp {
  int bits = 4;
  double p = 0.5;
};
struct RandomSolarizeOp {
  double threshold = 128;
  double p = 0.5;
};
struct RandomAdjustSharpnessOp {
  double sharpness_factor = 2;
  double p = 0.5;
};
struct RandomAutocontrastOp {
  double p = 0.5;
};
struct RandomEqualizeOp {
  double p = 0.5;
};
// torchvision.transforms.v2.RandomAffine(degrees, translate, scale, shear, interpolation, fill,
// center), drawn as its get_params: angle uniform in `degrees`; translation round(uniform(
// -translate[0] * width, +...)) pixels (and height for y) when given; scale uniform in `scale`
// when given, else 1; shear x uniform in shear[0..1], y in shear[2..3]. The output keeps the
// input's size; boxes take the box around their transformed corners (clipped).
struct RandomAffineOp {
  std::array<double, 2> degrees = {0, 0};
  std::optional<std::array<double, 2>> translate;  // fractions of width, height
  std::optional<std::array<double, 2>> scale;
  std::array<double, 4> shear = {0, 0, 0, 0};  // x range, y range (degrees)
  image::AffineInterpolation interpolation = image::AffineInterpolation::kNearest;
  std::vector<double> fill;                     // one value or one per channel; empty: 0
  std::optional<std::array<double, 2>> center;  // pixels from the top-left; none: the center
};
struct AutoAugmentOp {
  image::PolicyOptions options;
};
struct RandAugmentOp {
  image::RandAugmentOptions rand;
  image::PolicyOptions options;
};
struct TrivialAugmentWideOp {
  image::TrivialAugmentWideOptions trivial;
  image::PolicyOptions options;
};

using OpSpec =
    std::variant<RandomResizedCropOp, ResizeOp, CenterCropOp, PadOp, RandomHorizontalFlipOp,
                 RandomVerticalFlipOp, RandomRotationOp, Rotate90Op, ToDtypeOp, NormalizeOp,
                 ColorJitterOp, RandomGrayscaleOp, GrayscaleOp, GaussianBlurOp, RandomErasingOp,
                 RandomInvertOp, RandomPosterizeOp, RandomSolarizeOp, RandomAdjustSharpnessOp,
                 RandomAutocontrastOp, RandomEqualizeOp, RandomAffineOp, AutoAugmentOp,
                 RandAugmentOp, TrivialAugmentWideOp>;

// How the label feature becomes the label output.
enum class LabelMode : uint8_t {
  kNone,      // no label
  kInt,       // one int64 per record -> int64 column [records]
  kMultiHot,  // int64 list -> float32 tensor [records, num_classes] of 0/1
  kPadded,    // int64 list -> int64 tensor [records, num_classes] padded with -1 (too many:
              // kInvalidArgument naming the record)
};

// torchvision.transforms.v2.MixUp / CutMix(alpha, num_classes) on each batch the op makes (the
// kernels of image/augment.h; sample i mixed with sample i - 1): the int label becomes a float32
// tensor [records, num_classes] of mixed one-hot labels. Needs label_mode kInt and a uint8 or
// float32 output; the generator is seeded by the batch's first record.
enum class BatchMixKind : uint8_t { kNone, kMixUp, kCutMix };
struct BatchMixOptions {
  BatchMixKind kind = BatchMixKind::kNone;
  double alpha = 1.0;
  int num_classes = 0;
};

struct RecipeOptions {
  std::vector<OpSpec> ops;
  BatchMixOptions batch_mix;
  std::string image_key = "image/encoded";
  std::string label_key = "image/class/label";
  std::string image_output = "image";
  std::string label_output = "label";
  LabelMode label_mode = LabelMode::kInt;
  int num_classes = 0;  // kMultiHot, kPadded
  // kInt: records without the label get this one; nullopt: the label is required.
  std::optional<int64_t> default_label;
  // Parsed with the image and passed through under their own keys (rows of skipped records
  // dropped with them).
  std::vector<example::FeatureSpec> extra_keys;
  // A float feature of 4 values per box (x0, y0, x1, y1); empty: none.
  std::string boxes_key;
  std::string boxes_output = "boxes";
  bool boxes_normalized = true;  // coordinates in [0, 1] of the image; false: pixels
  image::Layout layout = image::Layout::kCHW;
  std::optional<uint64_t> seed;  // nullopt: drawn when the op is made
  bool dct_scaling = true;
  uint64_t max_pixels = uint64_t{1} << 28;
  format::CorruptionPolicy on_corruption = format::CorruptionPolicy::kRaise;
  std::string name = "compose";
};

// Errors: kInvalidArgument naming the op (by position and name) for bad parameters, an op
// after ToDtype / Normalize, an output size that varies per record, Normalize on uint8.
Result<pipeline::MapOp> Compose(RecipeOptions options);

// The output [height, width] of the recipe (what Compose checks).
Result<std::array<int, 2>> OutputSize(const std::vector<OpSpec>& ops);

// The name torchvision gives the op ("RandomResizedCrop", ...).
std::string_view OpName(const OpSpec& op);

// torchvision's Resize output size (height, width) for a width x height image.
std::array<int, 2> ResizeOutputSize(const ResizeOp& op, int width, int height);

}  // namespace recordflow::vision
