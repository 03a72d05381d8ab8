// Image ops for training input pipelines: JPEG decode fused with crop and DCT scaling, a
// resampler (bilinear / area / nearest) over a fractional source box, center crop, flip,
// normalize to float32 / float16 / bfloat16 / uint8 in HWC or CHW, and the random crop sampler
// of torchvision's RandomResizedCrop.
//
// Pixel kernels exist twice: a scalar reference and vectorized backends (the same source
// compiled with auto-vectorisation for SSE2 and for AVX2+FMA, picked at run time by CPU
// features). Every backend gives bit-identical results (no FP contraction, no reassociation);
// ops_test.cc runs the same tests against each. SetKernelBackend() forces one (tests, bench).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "recordflow/core/dtype.h"
#include "recordflow/core/random.h"
#include "recordflow/core/status.h"
#include "recordflow/image/image.h"

namespace recordflow::image {

// A rectangle of pixels: columns [x, x + width), rows [y, y + height).
struct Rect {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
  friend bool operator==(const Rect&, const Rect&) = default;
};

// A source region with fractional edges, in pixels of the image it refers to.
struct Box {
  double x = 0, y = 0, width = 0, height = 0;
};

// What to do with libjpeg warnings (corrupt data that libjpeg decodes anyway, e.g. "extraneous
// bytes before marker", "corrupt JPEG data: premature end of data segment"). A truncated file
// ("premature end of JPEG file") is always kDataLoss.
enum class JpegWarnings : uint8_t {
  kError,  // kDataLoss with libjpeg's message
  kCount,  // decode, and count them in DecodedRegion::warnings
};

struct RegionDecodeOptions {
  // The part of the image wanted, in image pixels; none: the whole image. It must lie inside
  // the image with width and height > 0 (CheckCropWindow), as TensorFlow's
  // decode_and_crop_jpeg and crop_to_bounding_box require; otherwise kInvalidArgument.
  std::optional<Rect> crop;
  // The size the crop will be resized to. When both are > 0 and `dct_scaling` is on, the
  // largest DCT scale 1/2, 1/4 or 1/8 whose scaled crop is still at least this large is used
  // (JPEG only): the decoder then does 1/4 .. 1/64 of the IDCT and upsampling work.
  int target_width = 0;
  int target_height = 0;
  bool dct_scaling = true;
  // Refuse images whose header promises more pixels (kResourceExhausted), before decoding.
  uint64_t max_pixels = uint64_t{1} << 28;
  // Progressive JPEG: more scans than this is kResourceExhausted (see DecodeOptions).
  int max_scans = kDefaultMaxScans;
  JpegWarnings warnings = JpegWarnings::kError;
  // JPEG: libjpeg's fancy (triangle-filtered) chroma upsampling, as a full decode by Pillow,
  // TensorFlow and OpenCV does. Off: faster, blockier chroma.
  bool fancy_upsampling = true;
  // JPEG: the image may keep the columns libjpeg decodes anyway beside the crop (iMCU
  // alignment; `box` still locates the crop): the rows are then written in place, without a
  // copy per row. The presets, which resample `box`, set it.
  bool allow_extra_columns = false;
};

// A decoded region: RGB pixels of (a little more than) the crop, at 1/scale_denom of the
// image's size. `box` is the requested crop in `image`'s pixel coordinates (fractional when
// DCT-scaled): resample `box` to get the crop at the target size.
struct DecodedRegion {
  Image image;
  Box box;
  int scale_denom = 1;  // 1, 2, 4 or 8
  int warnings = 0;     // libjpeg warnings seen (JpegWarnings::kCount)
  ImageFormat format = ImageFormat::kUnknown;
};

// The header fields decoding needs (from the bytes' own header; JPEG: libjpeg's parse).
struct ImageHeader {
  ImageFormat format = ImageFormat::kUnknown;
  int width = 0;
  int height = 0;
};

// Decodes JPEGs through libjpeg-turbo, keeping its state and buffers between calls: in steady
// state a decode allocates nothing but libjpeg's per-image pools.
//
// JPEG: only the rows of the crop are decoded (jpeg_skip_scanlines past the rest, no work at
// all below it) and only the iMCU columns that hold it (jpeg_crop_scanline). Without DCT
// scaling the crop's pixels equal those of a full decode (ops_test.cc checks it, fancy
// upsampling included: one pixel of margin keeps the upsampler's edge handling out of the crop).
// Grayscale, CMYK and YCCK JPEGs give RGB; progressive JPEGs work (at the cost of buffering all
// coefficients, as any progressive decode). Other formats (PNG, BMP, GIF, WebP) are decoded
// whole by image::Decode and then cropped.
//
// Errors: kInvalidArgument for bytes that are not an image ("not an image") or a crop window
// not inside the image; kDataLoss for a corrupt or truncated image (libjpeg's message);
// kResourceExhausted above max_pixels or max_scans; kUnimplemented for formats not built in.
//
// Thread safety: thread-compatible (one decoder per thread). Lifetime: independent of the
// bytes given (nothing is kept).
class ImageDecoder {
 public:
  ImageDecoder();
  ~ImageDecoder();
  ImageDecoder(const ImageDecoder&) = delete;
  ImageDecoder& operator=(const ImageDecoder&) = delete;

  // Format and size from the header alone. Errors as DecodeRegion.
  Result<ImageHeader> ReadHeader(std::span<const std::byte> data);

  // Decodes `options.crop` of the image into `out` (whose buffers are reused).
  Status DecodeRegion(std::span<const std::byte> data, const RegionDecodeOptions& options,
                      DecodedRegion* out);

  struct JpegState;  // libjpeg state, defined in jpeg_decode.cc

 private:
  std::unique_ptr<JpegState> jpeg_;
};

// OK when `crop` lies inside a width x height image with width and height > 0 (TensorFlow's
// rule for crop windows); otherwise kInvalidArgument naming the window and the image size.
Status CheckCropWindow(const Rect& crop, int width, int height);

// Decodes any supported image to RGB (a new decoder per call; see ImageDecoder for reuse).
Result<Image> DecodeImageRgb(std::span<const std::byte> data,
                             uint64_t max_pixels = uint64_t{1} << 28,
                             int max_scans = kDefaultMaxScans);

// The DCT scale denominator (1, 2, 4 or 8) DecodeRegion picks for a crop of crop_w x crop_h
// resized to target_w x target_h: the largest whose scaled crop still covers the target.
int ChooseScaleDenom(int crop_w, int crop_h, int target_w, int target_h);

// ---- resampling ------------------------------------------------------------------------------

enum class Interpolation : uint8_t {
  // Triangle filter, widened by the scale factor when shrinking (antialiased, like Pillow's
  // BILINEAR and TensorFlow's bilinear with antialias=True); plain bilinear when enlarging.
  // Pixel centers at +0.5 (half_pixel_centers).
  kBilinear,
  // Box filter: each output pixel is the mean of the input area it covers (fractional edges
  // weighted by coverage; OpenCV's INTER_AREA / TF's area for shrinking).
  kArea,
  // The input pixel under the output pixel's center (Pillow's NEAREST).
  kNearest,
  // Keys cubic (a = -0.5) over 4 taps, widened by the scale factor when shrinking and
  // renormalised at the edges: Pillow's BICUBIC and torchvision's bicubic with antialias=True.
  // The result is rounded and clamped to 0..255 (both produce uint8; the cubic overshoots).
  kBicubic,
  // torchvision's bilinear with antialias=False: 2-tap linear interpolation at every scale (the
  // filter is not widened when shrinking, so it aliases, as torch's interpolate).
  kBilinearNoAntialias,
  // torchvision's bicubic with antialias=False (torch's interpolate "bicubic": a = -0.75, 4 taps
  // at every scale, indices clamped to the edge), rounded and clamped to 0..255.
  kBicubicNoAntialias,
};

// The filter torchvision uses for `interpolation` with `antialias` (false selects the
// *NoAntialias variants of bilinear and bicubic; nearest and area ignore it).
Interpolation WithAntialias(Interpolation interpolation, bool antialias);

// Parses "bilinear", "bicubic", "area", "nearest". Errors: kInvalidArgument.
Result<Interpolation> ParseInterpolation(std::string_view name);

// Resamples `box` of an 8-bit image (any channel count 1..4) to out_w x out_h float pixels
// (HWC, values 0..255, not rounded except by the bicubic filters) in `out` (resized, reused). The
// box must lie within the image. flip: the output's columns mirrored (flip_left_right fused in at
// no cost; the same values as flipping after). Errors: kInvalidArgument for an empty image, box or
// size.
Status ResampleToFloat(const Image& image, const Box& box, int out_w, int out_h,
                       Interpolation interpolation, std::vector<float>* out, bool flip = false);

// As ResampleToFloat, rounded to 8 bits. The whole image when `box` is null.
Result<Image> Resample(const Image& image, int out_w, int out_h, Interpolation interpolation,
                       const Box* box = nullptr);

// The middle width x height of the image (torchvision's center_crop rounding: offsets are
// round((W - width) / 2)). Errors: kInvalidArgument when larger than the image or empty.
Result<Image> CenterCrop(const Image& image, int width, int height);

// Mirror image (columns reversed). Exact.
Image FlipLeftRight(const Image& image);

// ---- normalize -------------------------------------------------------------------------------

// An image tensor's element type is core's DType (core/dtype.h), one of kUint8, kFloat16,
// kBFloat16, kFloat32.
using TensorType = recordflow::DType;
enum class Layout : uint8_t { kHWC, kCHW };

// True for the four types above.
bool IsTensorType(TensorType type);
// "uint8", "float16", "bfloat16", "float32". Errors: kInvalidArgument for any other name.
Result<TensorType> ParseTensorType(std::string_view name);
Result<Layout> ParseLayout(std::string_view name);  // "HWC", "CHW"

// out = (pixel / 255 - mean[c]) / std[c], in `type` (float16 / bfloat16 rounded to nearest
// even). kUint8 ignores mean/std: the pixel rounded to 0..255.
struct NormalizeOptions {
  std::array<float, 3> mean = {0.485f, 0.456f, 0.406f};  // ImageNet, as torchvision
  std::array<float, 3> std = {0.229f, 0.224f, 0.225f};
  TensorType type = TensorType::kFloat32;
  Layout layout = Layout::kHWC;
  bool flip = false;  // mirror the columns while writing (flip_left_right fused in)
};

// Writes a float RGB image (HWC, 0..255, as ResampleToFloat gives) of width x height into
// `out`, which must hold exactly width * height * 3 values of options.type. Errors:
// kInvalidArgument for a wrong size or non-positive std.
Status NormalizeInto(std::span<const float> pixels, int width, int height,
                     const NormalizeOptions& options, std::span<std::byte> out);

// ResampleToFloat of `box` to out_w x out_h, then NormalizeInto `out` with `options` (flip
// included), one output row at a time so each row is normalised while it is in cache: the same
// values, bit for bit, without the intermediate float image. The image must have 3 channels.
// Errors: those of both.
Status ResampleNormalizeInto(const Image& image, const Box& box, int out_w, int out_h,
                             Interpolation interpolation, const NormalizeOptions& options,
                             std::span<std::byte> out);

// ---- random resized crop -------------------------------------------------------------------

// Per-element augmentation decisions draw from recordflow's one generator.
using Rng = SplitMix64;

// A seed for one element: mixes the pipeline's seed with where the record came from and the
// epoch, so that the same record gets the same augmentation in a re-run and a new one each
// epoch.
uint64_t ElementSeed(uint64_t seed, uint64_t file, uint64_t index, uint64_t epoch);

struct RandomResizedCropOptions {
  std::array<double, 2> scale = {0.08, 1.0};             // of the image's area
  std::array<double, 2> ratio = {3.0 / 4.0, 4.0 / 3.0};  // width / height, sampled log-uniform
};

// torchvision.transforms.RandomResizedCrop.get_params: up to 10 tries of (area fraction
// uniform in scale, log aspect ratio uniform in log(ratio), w = round(sqrt(area * ratio)),
// h = round(sqrt(area / ratio)), round half to even), accepted when 0 < w <= width and
// 0 < h <= height, with the offset uniform over the valid positions; otherwise the center crop
// of the whole image clamped to the ratio range. Needs only the image's size (the header).
Rect RandomResizedCropRect(int width, int height, const RandomResizedCropOptions& options,
                           Rng& rng);

// ---- kernel backends ---------------------------------------------------------------------------

enum class KernelBackend : uint8_t { kAuto, kScalar, kSse2, kAvx2 };
// The backend in use ("scalar", "sse2", "avx2").
std::string_view KernelBackendName();
// Forces a backend (kAuto: the best the CPU has). Errors: kUnimplemented when the CPU lacks it.
// Not thread-safe with ops running: for tests and benchmarks.
Status SetKernelBackend(KernelBackend backend);

}  // namespace recordflow::image
