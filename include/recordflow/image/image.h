// The image layer: what an encoded image is (format sniffing and a header probe that decodes
// no pixels), decoding to 8-bit pixels, JPEG encoding, resizing and EXIF orientation.
//
// Every entry point takes untrusted bytes and never reads outside the given span. Safety limits
// (maximum pixel count) are options with sane defaults: a header that promises a huge image is
// refused with kResourceExhausted before any pixel memory is allocated.
//
// Thread safety: every function here is thread-safe (no shared state); Image is a value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "recordflow/core/status.h"

namespace recordflow::image {

enum class ImageFormat : uint8_t { kUnknown, kJpeg, kPng, kGif, kBmp, kWebp };

// "JPEG", "PNG", "GIF", "BMP", "WEBP" (the spelling of TF's image/format feature), "" for
// kUnknown.
std::string_view ImageFormatName(ImageFormat format);

// The format the first bytes announce (magic numbers only; nothing else is checked).
ImageFormat SniffFormat(std::span<const std::byte> data);

// How the stored samples are to be interpreted.
enum class ColorSpace : uint8_t {
  kUnknown,
  kGray,       // 1 channel
  kGrayAlpha,  // 2 channels (PNG)
  kRGB,        // 3 channels stored as RGB (PNG, BMP, GIF, WebP, Adobe JPEG without transform)
  kRGBA,       // 4 channels (PNG, BMP, WebP with alpha)
  kYCbCr,      // 3-channel JPEG (the usual case; decodes to RGB)
  kCMYK,       // 4-channel JPEG
  kYCCK,       // 4-channel JPEG, Adobe transform 2
};

// "Gray", "GrayAlpha", "RGB", "RGBA", "YCbCr", "CMYK", "YCCK", "".
std::string_view ColorSpaceName(ColorSpace colorspace);

// What a header says about an image.
struct ImageInfo {
  ImageFormat format = ImageFormat::kUnknown;
  int width = 0;
  int height = 0;
  // Channels as stored: 1 gray, 2 gray+alpha, 3 color, 4 CMYK/YCCK/RGBA.
  int channels = 0;
  ColorSpace colorspace = ColorSpace::kUnknown;
  // EXIF orientation tag (1..8; 1 = as stored); JPEG (APP1 Exif) only, 1 elsewhere.
  int orientation = 1;
  // JPEG: progressive (SOF2) coding. Other formats: false.
  bool progressive = false;
  // JPEG: chroma subsampling of a 3-component image in units of the luma block, e.g. 2x2 for
  // 4:2:0 and 1x1 for 4:4:4. 0 when not applicable.
  int chroma_h = 0;
  int chroma_v = 0;
  // GIF / WebP: more than one frame (only the first is decoded).
  bool animated = false;
  // JPEG with check_structure: the number of scans (SOS markers). 0 otherwise.
  int scans = 0;

  // Channels of the decoded pixels (Decode with desired_channels = 0): CMYK/YCCK decode to RGB.
  int decoded_channels() const;
  uint64_t pixels() const { return static_cast<uint64_t>(width) * static_cast<uint64_t>(height); }
};

struct ProbeOptions {
  // Also check the file's structure without decoding pixels, so that a truncated, lying or
  // damaged file is reported as kDataLoss (one pass over the bytes):
  //  JPEG: every marker segment and the entropy-coded data up to the EOI marker; at least one
  //    scan; and enough entropy-coded bytes for the blocks the header promises (a Huffman-coded
  //    block of a DC scan takes at least one bit), which catches a header claiming far more
  //    pixels than the data holds and scans cut short.
  //  PNG: every chunk's length and CRC, IHDR first, PLTE for palette images, IDAT present and
  //    contiguous, IEND last; the IDAT zlib stream complete and inflating to at least the rows
  //    the header promises (skipped above max_pixels, which the caller refuses anyway).
  //  GIF: every block and sub-block up to the trailer, at least one image.
  //  BMP: palette and pixel data inside the file.  WebP: the RIFF size inside the file.
  bool check_structure = false;
  uint64_t max_pixels = uint64_t{1} << 28;
};

// Reads the header of a JPEG, PNG, GIF, BMP or WebP image without decoding pixels.
// Errors: kInvalidArgument when the bytes are not an image of a known format ("not an
// image"); kDataLoss for a known format whose header is truncated or malformed (or, with
// check_structure, a file failing the checks listed there); kUnimplemented for a valid header
// of a variant not supported (e.g. 12-bit or arithmetic-coded JPEG, a JPEG whose height is set
// by a DNL marker).
Result<ImageInfo> Probe(std::span<const std::byte> data, ProbeOptions options = {});

// Decoded pixels: 8 bits per sample, rows top to bottom, channels interleaved (HWC), no padding.
struct Image {
  int width = 0;
  int height = 0;
  int channels = 0;  // 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA
  std::vector<uint8_t> pixels;

  size_t row_bytes() const { return static_cast<size_t>(width) * static_cast<size_t>(channels); }
  uint8_t* row(int y) { return pixels.data() + static_cast<size_t>(y) * row_bytes(); }
  const uint8_t* row(int y) const { return pixels.data() + static_cast<size_t>(y) * row_bytes(); }
};

// Decoded pixels with 16 bits per sample (Decode16), laid out as Image.
struct Image16 {
  int width = 0;
  int height = 0;
  int channels = 0;
  std::vector<uint16_t> pixels;

  size_t row_samples() const { return static_cast<size_t>(width) * static_cast<size_t>(channels); }
};

// The progressive-JPEG scan limit TurboJPEG applies (TJPARAM_SCANLIMIT in its tools).
inline constexpr int kDefaultMaxScans = 500;

struct DecodeOptions {
  // Output channels: 0 = as decoded_channels() says; 1 = gray; 3 = RGB (alpha dropped, gray
  // replicated); 4 = RGBA. Other values are kInvalidArgument.
  int desired_channels = 0;
  // Refuse images with more pixels than this (kResourceExhausted), before allocating. GIF:
  // every frame is held to it too, and a frame may not cover more than the larger of the
  // logical screen's area and kMaxGifFrameSlack pixels (only the screen's pixels are kept;
  // a huge frame on a tiny screen is CPU work for nothing).
  uint64_t max_pixels = uint64_t{1} << 28;
  // Progressive JPEG: refuse a file with more scans than this (kResourceExhausted). Each scan
  // is a pass over all coefficients: a small file of thousands of tiny scans costs minutes.
  // Real encoders write fewer than 20.
  int max_scans = kDefaultMaxScans;
  // Rotate/flip as the EXIF orientation tag says, so that the result is upright.
  bool apply_orientation = false;
  // JPEG only: when > 0, decode at the smallest DCT scale (1/8, 1/4, 1/2) that keeps the
  // shorter side >= this many pixels (much faster when the caller shrinks the image anyway);
  // other formats decode at full size. 0: full size.
  int min_shorter_side = 0;
};

// A GIF frame may cover up to this many pixels beyond the logical screen's area.
inline constexpr uint64_t kMaxGifFrameSlack = uint64_t{1} << 20;

// Decodes a JPEG, PNG, GIF (first frame), BMP or WebP image. PNG samples are returned as
// stored, like TensorFlow's decode_png: no gamma or colour-profile conversion (gAMA, cHRM,
// sRGB and iCCP chunks are ignored), 16-bit samples give their high byte, a palette image
// with a tRNS chunk decodes to RGBA. Errors: those of Probe; kDataLoss for corrupt pixel data;
// kResourceExhausted above max_pixels or max_scans; kUnimplemented for a format not compiled
// in (GIF, WebP without their libraries).
Result<Image> Decode(std::span<const std::byte> data, DecodeOptions options = {});

// As Decode, with 16 bits per sample (TensorFlow's decode_png / decode_image with
// dtype=tf.uint16): a 16-bit PNG gives its samples; 8-bit sources give value * 257 (TF's
// convert_image_dtype). Errors: those of Decode.
Result<Image16> Decode16(std::span<const std::byte> data, DecodeOptions options = {});

// True when Decode supports `format` in this build.
bool CanDecode(ImageFormat format);

enum class ChromaSubsampling : uint8_t { k420, k422, k444 };
// "4:2:0", "4:2:2", "4:4:4". Errors: kInvalidArgument naming the value and the accepted ones.
Result<ChromaSubsampling> ParseChromaSubsampling(std::string_view name);
std::string_view ChromaSubsamplingName(ChromaSubsampling subsampling);

struct JpegEncodeOptions {
  int quality = 95;  // 1..100
  ChromaSubsampling subsampling = ChromaSubsampling::k420;
  // Optimized Huffman tables: smaller files, a little slower.
  bool optimize_coding = true;
  bool progressive = false;
};

// Encodes a 1-channel (grayscale JPEG) or 3-channel (YCbCr JPEG) image; 2- and 4-channel
// images have their alpha dropped. The output is deterministic for the same input and options.
// Errors: kInvalidArgument for an empty image or bad options.
Result<std::string> EncodeJpeg(const Image& image, JpegEncodeOptions options = {});

enum class ResizeFilter : uint8_t {
  // Triangle (bilinear) filter widened by the scale factor when shrinking, so that every input
  // pixel contributes (antialiased, like PIL's BILINEAR); plain bilinear when enlarging.
  kBilinearAntialias,
  // Box filter over the covered area (OpenCV's INTER_AREA for shrinking).
  kArea,
};

struct ResizeOptions {
  ResizeFilter filter = ResizeFilter::kBilinearAntialias;
};

// Resamples `image` to width x height (both >= 1) with ops.h's resampler (Interpolation
// kBilinear or kArea): the same bytes on every machine. Errors: kInvalidArgument for an empty
// image or a zero size.
Result<Image> Resize(const Image& image, int width, int height, ResizeOptions options = {});

// The size that makes the shorter side `shorter` and keeps the aspect ratio (rounded, >= 1).
void SizeForShorterSide(int width, int height, int shorter, int* out_width, int* out_height);

// Applies EXIF orientation 1..8 (values outside are treated as 1): the result is upright.
Image ApplyOrientation(const Image& image, int orientation);

}  // namespace recordflow::image
