// Over 600 lines: the fused crop/decode checks and the kernel-backend battery (every kernel on
// every backend against the portable one) share the test photos, JPEG encoders, crop and PSNR
// helpers defined at the top.
#include "recordflow/image/ops.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "recordflow/image/image.h"
#include "recordflow/image/image_test_util.h"
#include "recordflow/image/kernels_internal.h"
#include "recordflow/image/libjpeg_test_util.h"

namespace recordflow::image {
namespace {

using testing_util::Bytes;

// Texture, edges and gradients: a JPEG of it has real high-frequency content and chroma.
Image Photo(int w, int h, int channels, uint32_t seed = 1) {
  Image img = testing_util::BlankImage(w, h, channels);
  uint32_t r = seed;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      r = r * 1664525u + 1013904223u;
      const int noise = static_cast<int>((r >> 24) & 31) - 16;
      const bool disc = ((x / 17) + (y / 23)) % 3 == 0;
      for (int c = 0; c < channels; ++c) {
        int v = (x * 255 / w) * (c + 1) / 3 + (y * 200 / h) * (3 - c) / 3 + noise + (disc ? 60 : 0);
        img.row(y)[x * channels + c] = static_cast<uint8_t>(std::clamp(v, 0, 255));
      }
    }
  }
  return img;
}

std::string Jpeg(const Image& img, ChromaSubsampling sub = ChromaSubsampling::k420,
                 bool progressive = false) {
  JpegEncodeOptions o;
  o.quality = 90;
  o.subsampling = sub;
  o.progressive = progressive;
  auto jpeg = EncodeJpeg(img, o);
  EXPECT_TRUE(jpeg.ok()) << jpeg.status().ToString();
  return *jpeg;
}

// A 4-component (CMYK, Adobe-inverted as Photoshop writes it) JPEG, straight through libjpeg.
std::string CmykJpeg(int w, int h) {
  return testing_util::LibjpegEncode(
      Photo(w, h, 4, 7), JCS_CMYK, [](jpeg_compress_struct& c) { jpeg_set_quality(&c, 90, TRUE); });
}

Image Crop(const Image& img, Rect r) {
  Image out;
  out.width = r.width;
  out.height = r.height;
  out.channels = img.channels;
  out.pixels.resize(out.row_bytes() * r.height);
  for (int y = 0; y < r.height; ++y) {
    std::memcpy(out.row(y), img.row(r.y + y) + static_cast<size_t>(r.x) * img.channels,
                out.row_bytes());
  }
  return out;
}

double Psnr(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  double se = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    se += d * d;
  }
  if (se == 0) return 99;
  return 10 * std::log10(255.0 * 255.0 * a.size() / se);
}

// ---- fused crop decode -------------------------------------------------------------------------

struct JpegCase {
  const char* name;
  int w, h, channels;
  ChromaSubsampling sub;
  bool progressive;
};

class FusedCropTest : public ::testing::TestWithParam<JpegCase> {
 protected:
  // The case's JPEG, and its full decode: what every crop is compared with.
  void SetUp() override {
    const JpegCase& jc = GetParam();
    jpeg_ = Jpeg(Photo(jc.w, jc.h, jc.channels), jc.sub, jc.progressive);
    DecodeOptions full_opts;
    full_opts.desired_channels = 3;
    auto full = Decode(Bytes(jpeg_), full_opts);
    ASSERT_TRUE(full.ok()) << full.status().ToString();
    full_ = std::move(*full);
  }

  // Expects `got` to hold exactly the pixels of crop `r` of the full decode.
  void ExpectCropOfFullDecode(const Image& got, const Rect& r) const {
    const Image want = Crop(full_, r);
    EXPECT_TRUE(got.pixels == want.pixels)
        << GetParam().name << " crop " << r.x << "," << r.y << " " << r.width << "x" << r.height
        << " differs (PSNR " << Psnr(got.pixels, want.pixels) << ")";
  }

  std::string jpeg_;
  Image full_;
};

TEST_P(FusedCropTest, CropDecodeEqualsFullDecodeThenCrop) {
  const JpegCase& jc = GetParam();
  ImageDecoder decoder;  // reused across crops
  const Rect crops[] = {{0, 0, jc.w, jc.h},
                        {0, 0, 1, 1},
                        {jc.w - 1, jc.h - 1, 1, 1},
                        {16, 16, 32, 32},
                        {15, 17, 33, 31},
                        {1, 0, jc.w - 2, jc.h},
                        {jc.w / 3, jc.h / 4, jc.w / 2, jc.h / 2},
                        {7, 9, jc.w - 7, jc.h - 9},
                        {jc.w - 40, 3, 40, jc.h - 3}};
  for (const Rect& r : crops) {
    RegionDecodeOptions o;
    o.crop = r;
    DecodedRegion region;
    Status s = decoder.DecodeRegion(Bytes(jpeg_), o, &region);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(region.scale_denom, 1);
    EXPECT_EQ(region.image.width, r.width);
    EXPECT_EQ(region.image.height, r.height);
    EXPECT_EQ(region.box.x, 0);
    EXPECT_EQ(region.box.width, r.width);
    ExpectCropOfFullDecode(region.image, r);
  }
}

// The presets' in-place mode: the decoded span may be wider than the crop, `box` locates the
// crop in it, and the crop's pixels are still those of a full decode.
TEST_P(FusedCropTest, ExtraColumnsHoldTheCropAtBox) {
  const JpegCase& jc = GetParam();
  ImageDecoder decoder;
  bool any_wider = false;
  for (const Rect& r :
       {Rect{0, 0, jc.w, jc.h}, Rect{16, 16, 32, 32}, Rect{15, 17, 33, 31},
        Rect{jc.w / 3, jc.h / 4, jc.w / 2, jc.h / 2}, Rect{jc.w - 40, 3, 40, jc.h - 3}}) {
    RegionDecodeOptions o;
    o.crop = r;
    o.allow_extra_columns = true;
    DecodedRegion region;
    Status s = decoder.DecodeRegion(Bytes(jpeg_), o, &region);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(region.image.height, r.height);
    ASSERT_GE(region.image.width, r.width);
    any_wider |= region.image.width > r.width;
    const int bx = static_cast<int>(region.box.x);
    EXPECT_EQ(region.box.x, bx);
    EXPECT_EQ(region.box.width, r.width);
    ASSERT_LE(bx + r.width, region.image.width);
    ExpectCropOfFullDecode(Crop(region.image, Rect{bx, 0, r.width, r.height}), r);
  }
  EXPECT_TRUE(any_wider) << "no crop kept extra columns: the in-place path did not run";
}

INSTANTIATE_TEST_SUITE_P(
    Jpegs, FusedCropTest,
    ::testing::Values(JpegCase{"420", 301, 227, 3, ChromaSubsampling::k420, false},
                      JpegCase{"422", 256, 200, 3, ChromaSubsampling::k422, false},
                      JpegCase{"444", 199, 160, 3, ChromaSubsampling::k444, false},
                      JpegCase{"gray", 211, 143, 1, ChromaSubsampling::k420, false},
                      JpegCase{"progressive420", 277, 190, 3, ChromaSubsampling::k420, true}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(FusedDecodeTest, DctScaleIsChosenWhenTheCropShrinksAnyway) {
  EXPECT_EQ(ChooseScaleDenom(224, 224, 224, 224), 1);
  EXPECT_EQ(ChooseScaleDenom(447, 500, 224, 224), 1);
  EXPECT_EQ(ChooseScaleDenom(448, 500, 224, 224), 2);
  EXPECT_EQ(ChooseScaleDenom(900, 1000, 224, 224), 4);
  EXPECT_EQ(ChooseScaleDenom(1800, 1792, 224, 224), 8);
  EXPECT_EQ(ChooseScaleDenom(4000, 300, 224, 224), 1);
}

TEST(FusedDecodeTest, DctScaledCropIsCloseToFullDecodeCropAndResize) {
  const Image src = Photo(640, 480, 3);
  const std::string jpeg = Jpeg(src);
  auto full = DecodeImageRgb(Bytes(jpeg));
  ASSERT_TRUE(full.ok());
  ImageDecoder decoder;
  const Rect r{100, 50, 480, 400};
  for (int target : {200, 100, 50}) {
    RegionDecodeOptions o;
    o.crop = r;
    o.target_width = o.target_height = target;
    DecodedRegion region;
    ASSERT_TRUE(decoder.DecodeRegion(Bytes(jpeg), o, &region).ok());
    EXPECT_EQ(region.scale_denom, ChooseScaleDenom(r.width, r.height, target, target));
    auto fused = Resample(region.image, target, target, Interpolation::kBilinear, &region.box);
    ASSERT_TRUE(fused.ok()) << fused.status().ToString();
    Box b{double(r.x), double(r.y), double(r.width), double(r.height)};
    auto ref = Resample(*full, target, target, Interpolation::kBilinear, &b);
    ASSERT_TRUE(ref.ok());
    EXPECT_GT(Psnr(fused->pixels, ref->pixels), 28) << "target " << target;
  }
}

TEST(FusedDecodeTest, CmykAndGrayGiveRgbLikeDecode) {
  const std::string cmyk = CmykJpeg(120, 90);
  DecodeOptions rgb;
  rgb.desired_channels = 3;
  auto want = Decode(Bytes(cmyk), rgb);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ImageDecoder decoder;
  RegionDecodeOptions o;
  o.crop = {10, 20, 50, 40};
  DecodedRegion region;
  ASSERT_TRUE(decoder.DecodeRegion(Bytes(cmyk), o, &region).ok());
  EXPECT_EQ(region.image.channels, 3);
  EXPECT_TRUE(region.image.pixels == Crop(*want, *o.crop).pixels);
}

TEST(FusedDecodeTest, PngAndOtherFormatsDecodeAndCrop) {
  // PNG through image::Decode, then cropped.
  auto png_src = Photo(64, 48, 3);
  // Encode a PNG by hand is long; use a BMP writer? Use the JPEG path's dispatch instead: a
  // 24-bit BMP is simple to write.
  std::string bmp(54 + 64 * 48 * 3, '\0');
  auto le32 = [&](size_t at, uint32_t v) { std::memcpy(&bmp[at], &v, 4); };
  bmp[0] = 'B', bmp[1] = 'M';
  le32(2, static_cast<uint32_t>(bmp.size()));
  le32(10, 54);
  le32(14, 40);
  le32(18, 64);
  le32(22, static_cast<uint32_t>(-48));  // top-down
  bmp[26] = 1, bmp[28] = 24;
  for (int y = 0; y < 48; ++y) {
    for (int x = 0; x < 64; ++x) {
      for (int c = 0; c < 3; ++c) bmp[54 + (y * 64 + x) * 3 + c] = png_src.row(y)[x * 3 + 2 - c];
    }
  }
  ImageDecoder decoder;
  RegionDecodeOptions o;
  o.crop = {5, 6, 20, 30};
  DecodedRegion region;
  Status s = decoder.DecodeRegion(Bytes(bmp), o, &region);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(region.format, ImageFormat::kBmp);
  EXPECT_TRUE(region.image.pixels == Crop(png_src, *o.crop).pixels);
  auto header = decoder.ReadHeader(Bytes(bmp));
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->width, 64);
  EXPECT_EQ(header->height, 48);
}

TEST(FusedDecodeTest, CorruptTruncatedAndNonImageDataAreClearErrors) {
  const std::string jpeg = Jpeg(Photo(200, 150, 3));
  ImageDecoder decoder;
  DecodedRegion region;
  RegionDecodeOptions o;
  // Not an image.
  Status s = decoder.DecodeRegion(Bytes(std::string("hello world, not a picture")), o, &region);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("not an image"), std::string::npos) << s.message();
  // Truncated: kDataLoss under both warning policies.
  for (JpegWarnings w : {JpegWarnings::kError, JpegWarnings::kCount}) {
    o.warnings = w;
    s = decoder.DecodeRegion(Bytes(jpeg.substr(0, jpeg.size() / 2)), o, &region);
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
    EXPECT_NE(s.message().find("corrupt JPEG"), std::string::npos) << s.message();
  }
  // Header only.
  s = decoder.DecodeRegion(Bytes(jpeg.substr(0, 40)), o, &region);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  // Pixel limit, before any decoding.
  o.max_pixels = 200 * 150 - 1;
  s = decoder.DecodeRegion(Bytes(jpeg), o, &region);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  // The decoder is still usable after errors.
  o = RegionDecodeOptions{};
  ASSERT_TRUE(decoder.DecodeRegion(Bytes(jpeg), o, &region).ok());
  EXPECT_EQ(region.image.width, 200);
  // Crop outside the image.
  o.crop = {300, 0, 10, 10};
  EXPECT_EQ(decoder.DecodeRegion(Bytes(jpeg), o, &region).code(), StatusCode::kInvalidArgument);
}

TEST(FusedDecodeTest, WarningsFailOrAreCountedByPolicy) {
  std::string jpeg = Jpeg(Photo(200, 150, 3));
  // Garbage bytes before the EOI marker: libjpeg warns ("extraneous bytes before marker").
  jpeg.insert(jpeg.size() - 2, "\x12\x34\x56");
  ImageDecoder decoder;
  DecodedRegion region;
  RegionDecodeOptions o;
  // The warning comes at the end of the data, after the last row: decode everything.
  o.warnings = JpegWarnings::kCount;
  Status s = decoder.DecodeRegion(Bytes(jpeg), o, &region);
  EXPECT_TRUE(s.ok()) << s.ToString();
  // Damaged entropy-coded data: the decoder may fail or warn, never crash; under kError a
  // warning is a kDataLoss.
  std::string bad = Jpeg(Photo(200, 150, 3));
  for (size_t i = bad.size() / 2; i < bad.size() / 2 + 40; ++i) bad[i] = static_cast<char>(0xFF);
  o.warnings = JpegWarnings::kError;
  s = decoder.DecodeRegion(Bytes(bad), o, &region);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  o.warnings = JpegWarnings::kCount;
  s = decoder.DecodeRegion(Bytes(bad), o, &region);
  if (s.ok()) EXPECT_GT(region.warnings, 0);
}

// ---- kernels: one suite, every backend
// -----------------------------------------------------------

class BackendTest : public ::testing::TestWithParam<KernelBackend> {
 protected:
  void SetUp() override {
    Status s = SetKernelBackend(GetParam());
    if (!s.ok()) GTEST_SKIP() << s.ToString();
  }
  void TearDown() override { (void)SetKernelBackend(KernelBackend::kAuto); }
};

TEST_P(BackendTest, ConstantImageResamplesToTheConstant) {
  Image img;
  img.width = 37, img.height = 23, img.channels = 3;
  img.pixels.assign(img.row_bytes() * img.height, 77);
  for (Interpolation m :
       {Interpolation::kBilinear, Interpolation::kArea, Interpolation::kNearest}) {
    for (auto [w, h] : {std::pair{10, 7}, std::pair{37, 23}, std::pair{100, 51}}) {
      auto out = Resample(img, w, h, m);
      ASSERT_TRUE(out.ok());
      for (uint8_t v : out->pixels) ASSERT_EQ(v, 77);
    }
  }
}

TEST_P(BackendTest, IdentityNearestAndIntegerAreaAreExact) {
  const Image img = Photo(40, 30, 3);
  for (Interpolation m :
       {Interpolation::kBilinear, Interpolation::kArea, Interpolation::kNearest}) {
    auto same = Resample(img, 40, 30, m);
    ASSERT_TRUE(same.ok());
    EXPECT_TRUE(same->pixels == img.pixels);
  }
  auto half = Resample(img, 20, 15, Interpolation::kNearest);
  ASSERT_TRUE(half.ok());
  for (int y = 0; y < 15; ++y) {
    for (int x = 0; x < 20; ++x) {
      for (int c = 0; c < 3; ++c)
        ASSERT_EQ(half->row(y)[x * 3 + c], img.row(2 * y + 1)[(2 * x + 1) * 3 + c]);
    }
  }
  auto area = Resample(img, 20, 15, Interpolation::kArea);
  ASSERT_TRUE(area.ok());
  for (int y = 0; y < 15; ++y) {
    for (int x = 0; x < 20; ++x) {
      for (int c = 0; c < 3; ++c) {
        const int s = img.row(2 * y)[(2 * x) * 3 + c] + img.row(2 * y)[(2 * x + 1) * 3 + c] +
                      img.row(2 * y + 1)[(2 * x) * 3 + c] + img.row(2 * y + 1)[(2 * x + 1) * 3 + c];
        ASSERT_NEAR(area->row(y)[x * 3 + c], s / 4.0, 0.51);
      }
    }
  }
}

TEST_P(BackendTest, EveryBackendGivesTheScalarBits) {
  const Image img = Photo(173, 129, 3, 5);
  const Box box{3.25, 7.5, 150.5, 100.0};
  std::vector<float> mine, ref;
  for (Interpolation m :
       {Interpolation::kBilinear, Interpolation::kArea, Interpolation::kNearest}) {
    // Odd and tiny widths reach the SIMD kernels' tails; 300 upsamples (two taps).
    for (auto [w, h] : {std::pair{64, 48}, std::pair{224, 224}, std::pair{31, 97}, std::pair{1, 1},
                        std::pair{2, 3}, std::pair{3, 2}, std::pair{5, 7}, std::pair{300, 20}}) {
      ASSERT_TRUE(SetKernelBackend(GetParam()).ok());
      ASSERT_TRUE(ResampleToFloat(img, box, w, h, m, &mine).ok());
      ASSERT_TRUE(SetKernelBackend(KernelBackend::kScalar).ok());
      ASSERT_TRUE(ResampleToFloat(img, box, w, h, m, &ref).ok());
      ASSERT_EQ(mine.size(), ref.size());
      ASSERT_EQ(std::memcmp(mine.data(), ref.data(), mine.size() * 4), 0);
      for (TensorType t : {TensorType::kFloat32, TensorType::kFloat16, TensorType::kBFloat16,
                           TensorType::kUint8}) {
        for (Layout l : {Layout::kHWC, Layout::kCHW}) {
          for (bool flip : {false, true}) {
            NormalizeOptions o;
            o.type = t, o.layout = l, o.flip = flip;
            std::vector<std::byte> a(ref.size() * DTypeSize(t)), b(a.size());
            ASSERT_TRUE(SetKernelBackend(GetParam()).ok());
            ASSERT_TRUE(NormalizeInto(ref, w, h, o, a).ok());
            ASSERT_TRUE(SetKernelBackend(KernelBackend::kScalar).ok());
            ASSERT_TRUE(NormalizeInto(ref, w, h, o, b).ok());
            ASSERT_TRUE(a == b) << DTypeName(t) << " flip " << flip;
          }
        }
      }
    }
  }
}

TEST_P(BackendTest, FlippedResampleIsTheResampleMirroredBitForBit) {
  const Image img = Photo(173, 129, 3, 9);
  const Box box{2.5, 4.0, 160.0, 101.5};
  std::vector<float> plain, flipped;
  for (Interpolation m :
       {Interpolation::kBilinear, Interpolation::kArea, Interpolation::kNearest}) {
    for (auto [w, h] :
         {std::pair{224, 224}, std::pair{31, 9}, std::pair{1, 3}, std::pair{300, 5}}) {
      ASSERT_TRUE(ResampleToFloat(img, box, w, h, m, &plain).ok());
      ASSERT_TRUE(ResampleToFloat(img, box, w, h, m, &flipped, /*flip=*/true).ok());
      ASSERT_EQ(plain.size(), flipped.size());
      for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x) {
          for (int c = 0; c < 3; ++c) {
            const size_t a = (static_cast<size_t>(y) * w + x) * 3 + c;
            const size_t b = (static_cast<size_t>(y) * w + (w - 1 - x)) * 3 + c;
            ASSERT_EQ(std::bit_cast<uint32_t>(flipped[a]), std::bit_cast<uint32_t>(plain[b]))
                << x << "," << y << " " << w;
          }
        }
      }
    }
  }
}

TEST_P(BackendTest, FusedResampleNormalizeEqualsTheTwoStepsBitForBit) {
  const Image img = Photo(173, 129, 3, 13);
  const Box box{1.5, 6.25, 150.0, 111.0};
  std::vector<float> floats;
  for (auto [w, h] : {std::pair{224, 224}, std::pair{31, 9}, std::pair{1, 2}, std::pair{300, 7}}) {
    for (TensorType t :
         {TensorType::kFloat32, TensorType::kFloat16, TensorType::kBFloat16, TensorType::kUint8}) {
      for (Layout l : {Layout::kHWC, Layout::kCHW}) {
        for (bool flip : {false, true}) {
          NormalizeOptions o;
          o.type = t, o.layout = l, o.flip = flip;
          const size_t bytes = static_cast<size_t>(w) * h * 3 * DTypeSize(t);
          std::vector<std::byte> fused(bytes), two_step(bytes);
          ASSERT_TRUE(
              ResampleNormalizeInto(img, box, w, h, Interpolation::kBilinear, o, fused).ok());
          ASSERT_TRUE(ResampleToFloat(img, box, w, h, Interpolation::kBilinear, &floats).ok());
          ASSERT_TRUE(NormalizeInto(floats, w, h, o, two_step).ok());
          ASSERT_TRUE(fused == two_step)
              << w << "x" << h << " " << DTypeName(t) << " flip " << flip;
        }
      }
    }
  }
  NormalizeOptions o;
  std::vector<std::byte> small(10);
  EXPECT_EQ(ResampleNormalizeInto(img, box, 4, 4, Interpolation::kBilinear, o, small).code(),
            StatusCode::kInvalidArgument);
  Image gray;
  gray.width = 4, gray.height = 4, gray.channels = 1;
  gray.pixels.assign(16, 9);
  std::vector<std::byte> out(4 * 4 * 3 * 4);
  EXPECT_EQ(
      ResampleNormalizeInto(gray, Box{0, 0, 4, 4}, 4, 4, Interpolation::kBilinear, o, out).code(),
      StatusCode::kInvalidArgument);
}

// The horizontal pass stores each pixel's four-value lane, the fourth landing on the next pixel;
// the row's last quad must not store past the row, so that the image after it in a batch
// (another thread's) is never touched: the bytes after the output stay as they were.
TEST_P(BackendTest, ResampleNormalizeWritesNothingPastItsOutput) {
  const Image img = Photo(173, 129, 3, 21);
  const Box box{1.5, 6.25, 150.0, 111.0};
  ASSERT_TRUE(SetKernelBackend(GetParam()).ok());
  for (int w : {1, 3, 4, 5, 7, 8, 9, 12, 224}) {
    const size_t bytes = static_cast<size_t>(w) * 5 * 3 * 4;
    std::vector<std::byte> buf(bytes + 64, std::byte{0xA5});
    NormalizeOptions o;
    ASSERT_TRUE(ResampleNormalizeInto(img, box, w, 5, Interpolation::kBilinear, o,
                                      std::span(buf).first(bytes))
                    .ok());
    for (size_t i = bytes; i < buf.size(); ++i) {
      ASSERT_EQ(buf[i], std::byte{0xA5}) << "width " << w << ", byte " << i - bytes << " past";
    }
  }
  ASSERT_TRUE(SetKernelBackend(KernelBackend::kAuto).ok());
}

// The SIMD kernels sum 16 values (vertical) and 4 pixels (horizontal) a step with all taps in
// registers: every tail length and tap count (1 to ~20) must still give the scalar bits.
TEST_P(BackendTest, EveryBlockTailAndTapCountGivesTheScalarBits) {
  std::vector<float> mine, ref;
  for (int iw : {1, 2, 5, 6, 11, 17, 22, 43}) {
    const Image img = Photo(iw, 19, 3, iw);
    const Box box{0, 0, static_cast<double>(iw), 19.0};
    for (Interpolation m : {Interpolation::kBilinear, Interpolation::kArea}) {
      for (int ow : {1, 3, 4, 5, 7, 8, 9, 13, 2 * iw + 1}) {
        // 19 rows to oh: 1 to about 20 pairs of vertical taps (12: 2 pairs, 9: 3, 7: 4).
        for (int oh : {1, 2, 7, 9, 12, 40}) {
          ASSERT_TRUE(SetKernelBackend(GetParam()).ok());
          ASSERT_TRUE(ResampleToFloat(img, box, ow, oh, m, &mine, /*flip=*/ow % 2 == 1).ok());
          ASSERT_TRUE(SetKernelBackend(KernelBackend::kScalar).ok());
          ASSERT_TRUE(ResampleToFloat(img, box, ow, oh, m, &ref, /*flip=*/ow % 2 == 1).ok());
          ASSERT_EQ(mine.size(), ref.size());
          ASSERT_EQ(std::memcmp(mine.data(), ref.data(), mine.size() * 4), 0)
              << iw << " -> " << ow << "x" << oh;
        }
      }
    }
  }
}

// The separable filters of the fixed-point path (bilinear with and without antialias, area),
// written out in double from their definitions, as the exact values the Q14 / Q7 kernels
// approximate.
std::vector<double> ExactFilterWeights(int in_size, double lo, double len, int out_size,
                                       Interpolation m, std::vector<int>* first) {
  const double scale = len / out_size;
  std::vector<double> w(static_cast<size_t>(out_size) * in_size, 0.0);
  first->assign(out_size, 0);
  for (int i = 0; i < out_size; ++i) {
    double* wi = &w[static_cast<size_t>(i) * in_size];
    double total = 0;
    for (int j = 0; j < in_size; ++j) {
      double v = 0;
      if (m == Interpolation::kArea) {
        const double a = lo + i * scale, b = a + scale;
        v = std::max(0.0, std::min(b, j + 1.0) - std::max(a, static_cast<double>(j)));
      } else {
        const double support = m == Interpolation::kBilinear ? std::max(scale, 1.0) : 1.0;
        const double t = std::abs((j + 0.5 - (lo + (i + 0.5) * scale)) / support);
        v = t < 1.0 ? 1.0 - t : 0.0;
      }
      wi[j] = v;
      total += v;
    }
    for (int j = 0; j < in_size; ++j) wi[j] /= total;
  }
  return w;
}

TEST_P(BackendTest, FixedPointResampleIsWithinHundredthsOfALevelOfTheExactFilter) {
  struct Case {
    int iw, ih;
    Box box;
    int ow, oh;
  };
  // Shrinks by 1.1x to 12x (2 to 27 taps), enlargements, a sub-pixel box.
  const Case cases[] = {{410, 400, {13.5, 7.25, 380.0, 390.5}, 224, 224},
                        {350, 350, {0, 0, 350, 350}, 224, 224},
                        {150, 170, {2.0, 3.5, 140.0, 160.0}, 224, 224},
                        {600, 480, {0, 0, 600, 480}, 50, 40},
                        {97, 61, {0.25, 0.75, 96.5, 60.0}, 23, 61}};
  for (const Case& c : cases) {
    const Image img = Photo(c.iw, c.ih, 3, static_cast<uint32_t>(c.iw));
    for (Interpolation m :
         {Interpolation::kBilinear, Interpolation::kBilinearNoAntialias, Interpolation::kArea}) {
      std::vector<float> got;
      ASSERT_TRUE(ResampleToFloat(img, c.box, c.ow, c.oh, m, &got).ok());
      std::vector<int> fx, fy;
      const std::vector<double> wx = ExactFilterWeights(c.iw, c.box.x, c.box.width, c.ow, m, &fx);
      const std::vector<double> wy = ExactFilterWeights(c.ih, c.box.y, c.box.height, c.oh, m, &fy);
      double worst = 0, sum = 0;
      std::vector<double> rows(static_cast<size_t>(c.iw) * 3);
      for (int y = 0; y < c.oh; ++y) {
        std::fill(rows.begin(), rows.end(), 0.0);
        for (int r = 0; r < c.ih; ++r) {
          const double w = wy[static_cast<size_t>(y) * c.ih + r];
          if (w == 0) continue;
          for (size_t i = 0; i < rows.size(); ++i) rows[i] += w * img.row(r)[i];
        }
        for (int x = 0; x < c.ow; ++x) {
          for (int ch = 0; ch < 3; ++ch) {
            double want = 0;
            for (int j = 0; j < c.iw; ++j) {
              want += wx[static_cast<size_t>(x) * c.iw + j] * rows[static_cast<size_t>(j) * 3 + ch];
            }
            const double d = std::abs(got[(static_cast<size_t>(y) * c.ow + x) * 3 + ch] - want);
            worst = std::max(worst, d);
            sum += d;
          }
        }
      }
      const double mean = sum / (static_cast<double>(c.ow) * c.oh * 3);
      // Q14 weights and Q7 intermediates: at most a few hundredths of a level off, and a few
      // thousandths on average (a float32 resample of 8-bit input is ~1e-5 off).
      EXPECT_LT(worst, 0.04) << c.iw << "x" << c.ih << " -> " << c.ow << "x" << c.oh << " mode "
                             << static_cast<int>(m);
      EXPECT_LT(mean, 0.01) << c.iw << "x" << c.ih << " -> " << c.ow << "x" << c.oh;
      if (std::getenv("RF_PRINT_RESAMPLE_ERROR")) {
        std::printf("%dx%d -> %dx%d mode %d: worst %.4f mean %.5f\n", c.iw, c.ih, c.ow, c.oh,
                    static_cast<int>(m), worst, mean);
      }
    }
  }
  // The largest sums the kernels can meet: all 255 through a 40x shrink (81 taps a side).
  Image white;
  white.width = 1200, white.height = 1000, white.channels = 3;
  white.pixels.assign(white.row_bytes() * white.height, 255);
  std::vector<float> got;
  ASSERT_TRUE(
      ResampleToFloat(white, Box{0, 0, 1200, 1000}, 30, 25, Interpolation::kBilinear, &got).ok());
  for (float v : got) ASSERT_EQ(v, 255.0f);
}

TEST_P(BackendTest, NormalizeKnownAnswers) {
  // Two pixels: (0, 128, 255) and (255, 0, 51).
  std::vector<float> px = {0, 128, 255, 255, 0, 51};
  NormalizeOptions o;
  o.mean = {0.5f, 0.5f, 0.5f};
  o.std = {0.5f, 0.25f, 1.0f};
  std::vector<float> out(6);
  ASSERT_TRUE(NormalizeInto(px, 2, 1, o, std::as_writable_bytes(std::span(out))).ok());
  const float want[6] = {-1.0f, (128 / 255.0f - 0.5f) / 0.25f, 0.5f, 1.0f, -2.0f, 0.2f - 0.5f};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(out[i], want[i], 1e-6) << i;
  o.layout = Layout::kCHW;
  o.flip = true;
  ASSERT_TRUE(NormalizeInto(px, 2, 1, o, std::as_writable_bytes(std::span(out))).ok());
  const float chw_flipped[6] = {want[3], want[0], want[4], want[1], want[5], want[2]};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(out[i], chw_flipped[i], 1e-6) << i;
  o = NormalizeOptions{};
  o.type = TensorType::kUint8;
  std::vector<float> px8 = {0.4f, 0.5f, 254.6f, -3.0f, 300.0f, 127.49f};
  std::vector<uint8_t> u8(6);
  ASSERT_TRUE(NormalizeInto(px8, 2, 1, o, std::as_writable_bytes(std::span(u8))).ok());
  EXPECT_EQ(u8, (std::vector<uint8_t>{0, 1, 255, 0, 255, 127}));
}

std::string BackendName(const ::testing::TestParamInfo<KernelBackend>& info) {
  static const char* const kNames[] = {"auto", "scalar", "sse2", "avx2"};
  return kNames[static_cast<int>(info.param)];
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendTest,
                         ::testing::Values(KernelBackend::kScalar, KernelBackend::kSse2,
                                           KernelBackend::kAvx2),
                         BackendName);

// The AVX2 backend's AVX-512 horizontal pass (a plan of byte permutes, kernels_internal.h), on
// and off, against the scalar bits: shrinks on both sides of the plan's window limit, outputs
// around multiples of its 8-output groups, flipped and not.
TEST(Avx512HorizontalTest, PlannedPassGivesTheScalarBitsAndIsUsedWhereItFits) {
  if (!internal::CpuHasAvx2()) GTEST_SKIP() << "this CPU lacks AVX2";
  const internal::Kernels& avx2 = internal::Avx2Kernels();
  // The AVX-512 plan or the AVX2 one, as the CPU and the window decide: eval's shrink (~1.5x,
  // 4 taps) fits the window; a 3x shrink (7 taps) does not.
  using Kind = internal::HorizontalQPlanKind;
  for (const auto& [step, taps, fits] : {std::tuple{1.5, 4, true}, std::tuple{3.0, 7, false}}) {
    std::vector<int32_t> start(224), pairs(224 * ((taps + 1) / 2), 0x20002000);
    for (int x = 0; x < 224; ++x) start[x] = static_cast<int32_t>(x * step);
    std::vector<uint8_t> plan;
    avx2.prepare_horizontal_q(start.data(), pairs.data(), taps, 224, 3, &plan);
    EXPECT_EQ(internal::PlanKind(plan),
              fits && internal::Avx512Usable() ? Kind::kAvx512 : Kind::kAvx2)
        << step;
    avx2.prepare_horizontal_q(start.data(), pairs.data(), taps, 3, 3, &plan);
    EXPECT_EQ(internal::PlanKind(plan), Kind::kNone) << "fewer than 4 outputs";
    avx2.prepare_horizontal_q(start.data(), pairs.data(), taps, 224, 1, &plan);
    EXPECT_EQ(internal::PlanKind(plan), Kind::kNone) << "one channel";
    // The scalar and SSE2 backends never plan.
    internal::Sse2Kernels().prepare_horizontal_q(start.data(), pairs.data(), taps, 224, 3, &plan);
    EXPECT_EQ(internal::PlanKind(plan), Kind::kNone) << "sse2";
  }
  const Image img = Photo(480, 61, 3, 21);
  std::vector<float> mine, ref;
  for (bool allowed : {true, false}) {
    internal::SetAvx512Allowed(allowed);
    for (Interpolation m :
         {Interpolation::kBilinear, Interpolation::kArea, Interpolation::kNearest}) {
      for (double bw : {100.25, 197.5, 331.0, 388.75, 430.0, 470.5}) {
        for (int ow : {7, 8, 9, 16, 23, 224, 231}) {
          for (bool flip : {false, true}) {
            const Box box{5.5, 2.0, bw, 55.0};
            ASSERT_TRUE(SetKernelBackend(KernelBackend::kAvx2).ok());
            ASSERT_TRUE(ResampleToFloat(img, box, ow, 9, m, &mine, flip).ok());
            ASSERT_TRUE(SetKernelBackend(KernelBackend::kScalar).ok());
            ASSERT_TRUE(ResampleToFloat(img, box, ow, 9, m, &ref, flip).ok());
            ASSERT_EQ(mine.size(), ref.size());
            ASSERT_EQ(std::memcmp(mine.data(), ref.data(), mine.size() * 4), 0)
                << "AVX-512 " << allowed << " width " << bw << " -> " << ow << " flip " << flip;
          }
        }
      }
    }
  }
  internal::SetAvx512Allowed(true);
  ASSERT_TRUE(SetKernelBackend(KernelBackend::kAuto).ok());
}

TEST(HalfTest, RoundToNearestEvenKnownAnswers) {
  using internal::FloatToBFloat16Bits;
  using internal::FloatToHalfBits;
  EXPECT_EQ(FloatToHalfBits(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalfBits(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalfBits(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalfBits(65519.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalfBits(65520.0f), 0x7C00);
  EXPECT_EQ(FloatToHalfBits(1.0f + 1.0f / 2048), 0x3C00);     // tie -> even
  EXPECT_EQ(FloatToHalfBits(1.0f + 3.0f / 2048), 0x3C02);     // tie -> even (up)
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(FloatToHalfBits(0.1f), 0x2E66);
  EXPECT_EQ(FloatToHalfBits(NAN) & 0x7C00, 0x7C00);
  EXPECT_EQ(FloatToBFloat16Bits(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBFloat16Bits(-0.1f), 0xBDCD);
  EXPECT_EQ(FloatToBFloat16Bits(1.0f + std::ldexp(1.0f, -8)), 0x3F80);  // tie -> even
}

// ---- crop, flip, random resized crop ---------------------------------------------------------

TEST(OpsTest, FlipIsExactAndAnInvolution) {
  const Image img = Photo(31, 17, 3);
  const Image f = FlipLeftRight(img);
  for (int y = 0; y < 17; ++y) {
    for (int x = 0; x < 31; ++x) {
      for (int c = 0; c < 3; ++c) ASSERT_EQ(f.row(y)[x * 3 + c], img.row(y)[(30 - x) * 3 + c]);
    }
  }
  EXPECT_TRUE(FlipLeftRight(f).pixels == img.pixels);
}

TEST(OpsTest, CenterCropUsesTorchvisionRounding) {
  const Image img = Photo(11, 8, 1);
  auto c = CenterCrop(img, 4, 5);
  ASSERT_TRUE(c.ok());
  // round(3.5) = 4 (half to even), round(1.5) = 2.
  EXPECT_TRUE(c->pixels == Crop(img, Rect{4, 2, 4, 5}).pixels);
  EXPECT_EQ(CenterCrop(img, 12, 1).status().code(), StatusCode::kInvalidArgument);
}

TEST(OpsTest, RandomResizedCropStaysInsideAndIsSeeded) {
  RandomResizedCropOptions o;
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    Rng a(seed), b(seed);
    const Rect r = RandomResizedCropRect(500, 375, o, a);
    EXPECT_TRUE(r == RandomResizedCropRect(500, 375, o, b));
    ASSERT_GT(r.width, 0);
    ASSERT_GT(r.height, 0);
    ASSERT_LE(r.x + r.width, 500);
    ASSERT_LE(r.y + r.height, 375);
    const double area = double(r.width) * r.height / (500.0 * 375.0);
    ASSERT_GE(area, 0.07);
  }
  // A very wide image cannot fit the ratio range: the fallback is the center crop clamped to
  // the largest ratio, h = 10, w = round(10 * 4/3) = 13.
  Rng rng(1);
  o.scale = {0.9, 1.0};
  const Rect fb = RandomResizedCropRect(1000, 10, o, rng);
  EXPECT_EQ(fb, (Rect{(1000 - 13) / 2, 0, 13, 10}));
  // Different positions and epochs give different seeds.
  EXPECT_NE(ElementSeed(1, 0, 5, 0), ElementSeed(1, 0, 5, 1));
  EXPECT_NE(ElementSeed(1, 0, 5, 0), ElementSeed(1, 1, 5, 0));
  EXPECT_NE(ElementSeed(1, 0, 5, 0), ElementSeed(2, 0, 5, 0));
  EXPECT_EQ(ElementSeed(1, 0, 5, 0), ElementSeed(1, 0, 5, 0));
}

// torchvision.transforms.v2.functional.resize of the uint8 row below to 1x3 (shrink) and 1x13
// (enlarge), per interpolation and antialias: the values torchvision 0.28 / torch 2.13 give.
// torch's antialiased uint8 path uses integer weights, hence +-1.
TEST(OpsTest, BicubicAndNoAntialiasFiltersMatchTorchvisionKnownAnswers) {
  Image row;
  row.width = 8;
  row.height = 1;
  row.channels = 1;
  row.pixels = {10, 200, 30, 250, 0, 90, 255, 40};
  struct Case {
    Interpolation mode;
    std::vector<int> shrunk, enlarged;
  };
  const std::vector<Case> cases = {
      {Interpolation::kBicubic,
       {105, 111, 131},
       {0, 90, 200, 74, 74, 244, 133, 0, 51, 156, 255, 129, 24}},
      {Interpolation::kBicubicNoAntialias,
       {187, 137, 238},
       {0, 102, 200, 73, 76, 244, 137, 0, 40, 167, 255, 142, 20}},
      {Interpolation::kBilinear,
       {109, 108, 134},
       {10, 90, 193, 89, 89, 225, 125, 10, 66, 147, 249, 131, 40}},
      {Interpolation::kBilinearNoAntialias,
       {168, 125, 219},
       {10, 90, 193, 89, 89, 225, 125, 10, 66, 147, 249, 131, 40}},
  };
  for (const Case& c : cases) {
    for (const auto* want : {&c.shrunk, &c.enlarged}) {
      const int w = static_cast<int>(want->size());
      Result<Image> got = Resample(row, w, 1, c.mode);
      ASSERT_TRUE(got.ok()) << got.status().message();
      for (int x = 0; x < w; ++x) {
        EXPECT_NEAR(got->pixels[x], (*want)[x], 1)
            << "mode " << static_cast<int>(c.mode) << " width " << w << " x " << x;
      }
    }
  }
  EXPECT_EQ(WithAntialias(Interpolation::kBicubic, false), Interpolation::kBicubicNoAntialias);
  EXPECT_EQ(WithAntialias(Interpolation::kBilinear, false), Interpolation::kBilinearNoAntialias);
  EXPECT_EQ(WithAntialias(Interpolation::kNearest, false), Interpolation::kNearest);
  EXPECT_EQ(*ParseInterpolation("bicubic"), Interpolation::kBicubic);
}
}  // namespace
}  // namespace recordflow::image
