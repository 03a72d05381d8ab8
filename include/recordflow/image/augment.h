// Photometric ops, affine ops and the augmentation policies of torchvision.transforms.v2 on
// 8-bit HWC images, plus batch-level MixUp and CutMix.
//
// Names, parameters and defaults follow torchvision v2; the functional ops compute what
// torchvision's tensor kernels compute on a uint8 image (same float32 formulas, same truncation
// or rounding to uint8). Where the arithmetic order differs (gaussian_blur's separable passes,
// the contrast mean's summation, affine grids in double precision) the result differs by at most
// one grey level, and for nearest-neighbour affine ops in the few pixels whose source coordinate
// lies on a rounding tie; python/tests/test_vision_augment.py states and checks each tolerance.
//
// Randomness: every random op takes the caller's generator (image::Rng, SplitMix64) and draws
// from it in a fixed order, so its output is a pure function of the image, the options and the
// generator's state: the same seed gives the same augmentation on every platform. The draws
// follow torchvision's sampling (which op, which magnitude, the sign, the order of ColorJitter's
// four adjustments) but come from recordflow's generator, not torch's.
//
// Ownership: the photometric ops, erase and the random wrappers around them take the image by
// value and write their result into its buffer: pass std::move(image) and no new buffer is
// allocated or zero-filled (a chain of them in a native map works in one buffer); pass an
// lvalue and it is copied first.
//
// Thread safety: every function is thread-safe (no shared state); pass one Rng per thread.
// Errors: kInvalidArgument naming the parameter and its accepted range, or an image with the
// wrong channel count (RGB ops need 3 channels; the others take 1 to 4).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "recordflow/core/status.h"
#include "recordflow/image/image.h"
#include "recordflow/image/ops.h"

namespace recordflow::image {

// ---- photometric (functional) ----------------------------------------------------------------

// v2.functional.adjust_brightness: trunc(clamp(x * factor)). factor >= 0.
Result<Image> AdjustBrightness(Image image, double factor);
// adjust_contrast: blend with the mean of the floored grayscale. factor >= 0. 1 or 3 channels.
Result<Image> AdjustContrast(Image image, double factor);
// adjust_saturation: blend with the floored grayscale. factor >= 0. 3 channels.
Result<Image> AdjustSaturation(Image image, double factor);
// adjust_hue: rotate the hue in HSV by factor (in [-0.5, 0.5]) turns. 3 channels.
Result<Image> AdjustHue(Image image, double factor);
// rgb_to_grayscale: trunc(0.2989 R + 0.587 G + 0.114 B), 1 or 3 output channels.
Result<Image> RgbToGrayscale(Image image, int num_output_channels = 1);
// posterize: keep the top `bits` (0..8) bits of each sample.
Result<Image> Posterize(Image image, int bits);
// solarize: samples >= threshold are inverted. threshold in [0, 255].
Result<Image> Solarize(Image image, double threshold);
// invert: 255 - x.
Image Invert(Image image);
// The pointwise ops on n interleaved uint8 samples, `in` to `out` (the same buffer or
// disjoint ones): the bindings write straight into the output array (no copy of the input, no
// zero-filled Image), which is most of the cost of an op this cheap.
Status PosterizeSamples(const uint8_t* in, uint8_t* out, size_t n, int bits);
Status SolarizeSamples(const uint8_t* in, uint8_t* out, size_t n, double threshold);
void InvertSamples(const uint8_t* in, uint8_t* out, size_t n);
// autocontrast: each channel stretched from [min, max] to [0, 255].
Image AutoContrast(Image image);
// equalize: each channel's histogram equalised (PIL's lookup table, as torchvision v2).
Image Equalize(Image image);
// adjust_sharpness: blend with the 3x3 smoothing (center weight 5/13) inside a one-pixel
// border; factor >= 0.
Result<Image> AdjustSharpness(const Image& image, double factor);
// gaussian_blur: separable Gaussian of kernel_size = {kx, ky} (odd, > 0) and sigma = {sx, sy}
// (> 0), reflect padding, rounded.
Result<Image> GaussianBlur(const Image& image, std::array<int, 2> kernel_size,
                           std::array<double, 2> sigma);
// erase: the rectangle filled with `value` (one value, or one per channel).
Result<Image> Erase(Image image, const Rect& rect, std::span<const double> value);

// ---- affine (functional) ---------------------------------------------------------------------

enum class AffineInterpolation : uint8_t { kNearest, kBilinear };

struct AffineOptions {
  double angle = 0;                          // degrees, counter-clockwise
  std::array<double, 2> translate = {0, 0};  // pixels
  double scale = 1.0;
  std::array<double, 2> shear = {0, 0};  // degrees
  AffineInterpolation interpolation = AffineInterpolation::kNearest;
  // Value of the pixels mapped from outside the image (one or one per channel). Empty: zero
  // padding, as torchvision's fill=None (with bilinear the edge blends toward 0).
  std::vector<double> fill;
  // Center of the transform in pixels; none: the image center.
  std::optional<std::array<double, 2>> center;
};

// v2.functional.affine (output the input's size; grid_sample, align_corners=False).
Result<Image> Affine(const Image& image, const AffineOptions& options);
// v2.functional.rotate without expand: Affine with angle, about the center.
Result<Image> Rotate(const Image& image, double angle,
                     AffineInterpolation interpolation = AffineInterpolation::kNearest,
                     std::span<const double> fill = {});

// ---- random transforms -------------------------------------------------------------------------

// v2.ColorJitter: each range is [min, max]; none leaves the adjustment out. The four run in a
// random order (torchvision's randperm(4)); each factor is uniform in its range.
struct ColorJitterOptions {
  std::optional<std::array<double, 2>> brightness;  // factors >= 0
  std::optional<std::array<double, 2>> contrast;    // factors >= 0
  std::optional<std::array<double, 2>> saturation;  // factors >= 0
  std::optional<std::array<double, 2>> hue;         // within [-0.5, 0.5]

  // torchvision's scalar form: b -> [max(0, 1 - b), 1 + b] (h -> [-h, h]); 0 -> none.
  static ColorJitterOptions FromScalars(double brightness, double contrast, double saturation,
                                        double hue);
};
Result<Image> ColorJitter(Image image, const ColorJitterOptions& options, Rng& rng);

// v2.RandomGrayscale(p): grayscale with the input's channel count with probability p.
Result<Image> RandomGrayscale(Image image, double p, Rng& rng);

// v2.GaussianBlur(kernel_size, sigma=(0.1, 2.0)): sigma uniform in [sigma[0], sigma[1]], the same
// for both axes.
struct GaussianBlurOptions {
  std::array<int, 2> kernel_size = {3, 3};
  std::array<double, 2> sigma = {0.1, 2.0};
};
Result<Image> RandomGaussianBlur(const Image& image, const GaussianBlurOptions& options, Rng& rng);

// v2.RandomErasing: with probability p, up to 10 tries of area fraction uniform in `scale`
// and log aspect ratio uniform in log(ratio) (h = round(sqrt(area * r)), w = round(sqrt(area
// / r)), accepted when h < height and w < width), filled with `value`.
// `random_mean` / `random_std` (pixel units, one per channel; both set or both empty): fill each
// sample with round(mean + std * z), z ~ N(0, 1) per sample, clamped to [0, 255]: torchvision's
// value="random" (N(0, 1) in the normalized domain) for a Normalize(mean/255, std/255) that
// follows, up to the 8-bit quantization and clamping.
struct RandomErasingOptions {
  double p = 0.5;
  std::array<double, 2> scale = {0.02, 0.33};
  std::array<double, 2> ratio = {0.3, 3.3};
  std::vector<double> value = {0.0};
  std::vector<double> random_mean;
  std::vector<double> random_std;
};
// The rectangle RandomErasing picks (none: no erase), and the op itself.
Result<std::optional<Rect>> RandomErasingRect(int width, int height,
                                              const RandomErasingOptions& options, Rng& rng);
Result<Image> RandomErasing(Image image, const RandomErasingOptions& options, Rng& rng);

// ---- policies ----------------------------------------------------------------------------------

// The ops of torchvision's augmentation spaces.
enum class AugmentOp : uint8_t {
  kIdentity,
  kShearX,
  kShearY,
  kTranslateX,
  kTranslateY,
  kRotate,
  kBrightness,
  kColor,
  kContrast,
  kSharpness,
  kPosterize,
  kSolarize,
  kAutoContrast,
  kEqualize,
  kInvert,
};
// "Identity", "ShearX", ... (torchvision's spelling).
std::string_view AugmentOpName(AugmentOp op);
Result<AugmentOp> ParseAugmentOp(std::string_view name);

// One op with its signed magnitude, applied as torchvision's _apply_image_or_video_transform:
// shear by atan(magnitude) about the corner, translate by int(magnitude) pixels, rotate by
// magnitude degrees, brightness/color/contrast/sharpness with factor 1 + magnitude, posterize
// to int(magnitude) bits, solarize at 255 * magnitude.
struct AppliedOp {
  AugmentOp op = AugmentOp::kIdentity;
  double magnitude = 0;
};
struct PolicyOptions {
  AffineInterpolation interpolation = AffineInterpolation::kNearest;
  std::vector<double> fill;  // as AffineOptions::fill
};
Result<Image> ApplyAugmentOp(Image image, const AppliedOp& op, const PolicyOptions& options = {});

enum class AugmentPolicy : uint8_t { kAutoAugmentImageNet, kRandAugment, kTrivialAugmentWide };

struct RandAugmentOptions {
  int num_ops = 2;
  int magnitude = 9;
  int num_magnitude_bins = 31;
};
struct TrivialAugmentWideOptions {
  int num_magnitude_bins = 31;
};

// The ops a policy picks for a width x height image (the draws only; apply them with
// ApplyAugmentOp). AutoAugment: one of the 25 ImageNet sub-policies, each of its two ops kept
// with its probability; RandAugment: num_ops ops uniform over its space at `magnitude`;
// TrivialAugmentWide: one op at a uniform magnitude bin. Signed magnitudes are negated with
// probability 1/2.
Result<std::vector<AppliedOp>> SampleAutoAugment(int width, int height, Rng& rng);
Result<std::vector<AppliedOp>> SampleRandAugment(int width, int height,
                                                 const RandAugmentOptions& options, Rng& rng);
Result<std::vector<AppliedOp>> SampleTrivialAugmentWide(int width, int height,
                                                        const TrivialAugmentWideOptions& options,
                                                        Rng& rng);

Result<Image> AutoAugment(Image image, const PolicyOptions& options, Rng& rng);
Result<Image> RandAugment(Image image, const RandAugmentOptions& rand_options,
                          const PolicyOptions& options, Rng& rng);
Result<Image> TrivialAugmentWide(Image image, const TrivialAugmentWideOptions& ta_options,
                                 const PolicyOptions& options, Rng& rng);

// ---- batch ops -----------------------------------------------------------------------------

// Beta(alpha, alpha) (Marsaglia-Tsang gamma draws from `rng`).
double SampleBeta(double alpha, Rng& rng);

// A batch [B, H, W, C] of uint8 or float32 samples, modified in place, with int labels in
// [0, num_classes); soft_labels (B * num_classes) receives the mixed one-hot labels. Pairing
// as torchvision v2: sample i is mixed with sample i - 1 (roll by 1).
struct BatchView {
  int batch = 0, height = 0, width = 0, channels = 0;
  uint8_t* u8 = nullptr;  // exactly one of u8 / f32
  float* f32 = nullptr;
  // Optional: the input batch (same shape and sample type, not overlapping u8 / f32). Then the
  // batch ops read it and write their whole result into u8 / f32 in one pass, so a caller that
  // keeps its input need not copy it into the output first. Null: the ops work in place.
  const void* source = nullptr;
};

// MixUp with a given lambda: x = lam * x + (1 - lam) * x_rolled (uint8: rounded). Errors:
// kInvalidArgument for a label outside [0, num_classes) (naming its index) or a bad view.
Status MixUpWithLambda(const BatchView& batch, std::span<const int64_t> labels, int num_classes,
                       double lambda, std::span<float> soft_labels);
// CutMix with a given box: the box's pixels come from the rolled batch; the labels mix with
// 1 - box area / image area.
Status CutMixWithBox(const BatchView& batch, std::span<const int64_t> labels, int num_classes,
                     const Rect& box, std::span<float> soft_labels);
// CutMix's box for lambda (torchvision v2: center uniform, half sides int(0.5 sqrt(1 - lam) W)
// and H, clamped to the image).
Rect CutMixBox(int width, int height, double lambda, Rng& rng);

// The random ops: lambda ~ Beta(alpha, alpha) (alpha > 0). Return lambda as used for labels.
Result<double> MixUp(const BatchView& batch, std::span<const int64_t> labels, int num_classes,
                     double alpha, std::span<float> soft_labels, Rng& rng);
Result<double> CutMix(const BatchView& batch, std::span<const int64_t> labels, int num_classes,
                      double alpha, std::span<float> soft_labels, Rng& rng);

}  // namespace recordflow::image
