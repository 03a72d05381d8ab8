#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "recordflow/image/image.h"
#include "recordflow/image/image_test_util.h"

namespace recordflow::image {
namespace {

using testing_util::Bytes;

// A smooth test pattern: gradients, so JPEG round trips stay close.
Image Pattern(int w, int h, int channels) {
  Image img = testing_util::BlankImage(w, h, channels);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < channels; ++c) {
        img.row(y)[x * channels + c] =
            static_cast<uint8_t>((x * 255 / w + y * 128 / h + c * 40) % 256);
      }
    }
  }
  return img;
}

std::string Jpeg(int w, int h, int channels, ChromaSubsampling sub = ChromaSubsampling::k420,
                 bool progressive = false) {
  JpegEncodeOptions o;
  o.subsampling = sub;
  o.progressive = progressive;
  auto jpeg = EncodeJpeg(Pattern(w, h, channels), o);
  EXPECT_TRUE(jpeg.ok()) << jpeg.status().ToString();
  return *jpeg;
}

TEST(ChromaSubsamplingNames, ParseAndNameRoundTrip) {
  for (auto c : {ChromaSubsampling::k420, ChromaSubsampling::k422, ChromaSubsampling::k444}) {
    EXPECT_EQ(*ParseChromaSubsampling(ChromaSubsamplingName(c)), c);
  }
  Result<ChromaSubsampling> bad = ParseChromaSubsampling("4:1:1");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(SniffFormat, MagicNumbers) {
  EXPECT_EQ(SniffFormat(Bytes(std::string("\xFF\xD8\xFF\xE0", 4))), ImageFormat::kJpeg);
  EXPECT_EQ(SniffFormat(Bytes("\x89PNG\r\n\x1a\nrest")), ImageFormat::kPng);
  EXPECT_EQ(SniffFormat(Bytes("GIF89a......")), ImageFormat::kGif);
  EXPECT_EQ(SniffFormat(Bytes("RIFF....WEBPVP8 ")), ImageFormat::kWebp);
  EXPECT_EQ(SniffFormat(Bytes("BM" + std::string(20, '\0'))), ImageFormat::kBmp);
  EXPECT_EQ(SniffFormat(Bytes("hello world")), ImageFormat::kUnknown);
  EXPECT_EQ(SniffFormat(Bytes("")), ImageFormat::kUnknown);
}

TEST(Probe, JpegHeaderWithoutDecoding) {
  for (auto [sub, h, v] :
       {std::tuple{ChromaSubsampling::k420, 2, 2}, std::tuple{ChromaSubsampling::k444, 1, 1},
        std::tuple{ChromaSubsampling::k422, 2, 1}}) {
    const std::string jpeg = Jpeg(123, 45, 3, sub);
    auto info = Probe(Bytes(jpeg), {.check_structure = true});
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(info->format, ImageFormat::kJpeg);
    EXPECT_EQ(info->width, 123);
    EXPECT_EQ(info->height, 45);
    EXPECT_EQ(info->channels, 3);
    EXPECT_EQ(info->colorspace, ColorSpace::kYCbCr);
    EXPECT_EQ(info->chroma_h, h);
    EXPECT_EQ(info->chroma_v, v);
    EXPECT_EQ(info->orientation, 1);
    EXPECT_FALSE(info->progressive);
  }
  auto gray = Probe(Bytes(Jpeg(10, 20, 1)));
  ASSERT_TRUE(gray.ok());
  EXPECT_EQ(gray->channels, 1);
  EXPECT_EQ(gray->colorspace, ColorSpace::kGray);
  auto progressive = Probe(Bytes(Jpeg(64, 64, 3, ChromaSubsampling::k420, true)), {true});
  ASSERT_TRUE(progressive.ok()) << progressive.status().ToString();
  EXPECT_TRUE(progressive->progressive);
}

// Inserts an APP1 Exif segment with the orientation tag after SOI.
std::string WithOrientation(const std::string& jpeg, int orientation, bool big_endian) {
  std::string tiff =
      big_endian ? std::string("MM\0\x2a\0\0\0\x08", 8) : std::string("II\x2a\0\x08\0\0\0", 8);
  auto u16 = [&](int v) {
    return big_endian ? std::string{static_cast<char>(v >> 8), static_cast<char>(v & 255)}
                      : std::string{static_cast<char>(v & 255), static_cast<char>(v >> 8)};
  };
  tiff += u16(1);  // one entry
  tiff +=
      u16(0x0112) + u16(3) + (big_endian ? std::string("\0\0\0\1", 4) : std::string("\1\0\0\0", 4));
  tiff += u16(orientation) + std::string(2, '\0');
  tiff += std::string(4, '\0');  // next IFD
  std::string payload = std::string("Exif\0\0", 6) + tiff;
  std::string segment = "\xFF\xE1";
  segment += static_cast<char>((payload.size() + 2) >> 8);
  segment += static_cast<char>((payload.size() + 2) & 255);
  return jpeg.substr(0, 2) + segment + payload + jpeg.substr(2);
}

TEST(Probe, ExifOrientationAndItsApplication) {
  const std::string jpeg = Jpeg(40, 20, 3);
  for (bool be : {false, true}) {
    for (int o = 1; o <= 8; ++o) {
      auto info = Probe(Bytes(WithOrientation(jpeg, o, be)));
      ASSERT_TRUE(info.ok()) << info.status().ToString();
      EXPECT_EQ(info->orientation, o);
    }
  }
  auto upright = Decode(Bytes(WithOrientation(jpeg, 6, false)), {.apply_orientation = true});
  ASSERT_TRUE(upright.ok());
  EXPECT_EQ(upright->width, 20);
  EXPECT_EQ(upright->height, 40);
  auto as_stored = Decode(Bytes(WithOrientation(jpeg, 6, false)));
  ASSERT_TRUE(as_stored.ok());
  EXPECT_EQ(as_stored->width, 40);
}

TEST(ApplyOrientation, AllEightAreInverses) {
  Image img = Pattern(5, 3, 1);
  // 6 (rotate 90 cw) then 8 (rotate 90 ccw) is the identity; 3 twice is too; 2, 4, 5, 7 are
  // involutions.
  EXPECT_EQ(ApplyOrientation(ApplyOrientation(img, 6), 8).pixels, img.pixels);
  for (int o : {2, 3, 4, 5, 7}) {
    EXPECT_EQ(ApplyOrientation(ApplyOrientation(img, o), o).pixels, img.pixels) << o;
  }
  Image rotated = ApplyOrientation(img, 6);
  EXPECT_EQ(rotated.width, 3);
  EXPECT_EQ(rotated.height, 5);
  // Rotating clockwise puts the bottom-left source pixel at the top-left.
  EXPECT_EQ(rotated.row(0)[0], img.row(2)[0]);
}

TEST(Probe, TruncatedAndGarbage) {
  const std::string jpeg = Jpeg(64, 48, 3);
  // Cut inside the entropy-coded data: the header probe passes, the structure walk does not.
  const std::string cut = jpeg.substr(0, jpeg.size() - 100);
  EXPECT_TRUE(Probe(Bytes(cut)).ok());
  auto checked = Probe(Bytes(cut), {.check_structure = true});
  EXPECT_EQ(checked.status().code(), StatusCode::kDataLoss);
  // Decoding reports the premature end too.
  EXPECT_EQ(Decode(Bytes(cut)).status().code(), StatusCode::kDataLoss);
  // Cut inside the header.
  EXPECT_EQ(Probe(Bytes(jpeg.substr(0, 30))).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(Probe(Bytes("plain text")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Probe(Bytes("")).status().code(), StatusCode::kInvalidArgument);
  // Every prefix is handled without reading out of bounds (ASan checks the reads).
  for (size_t n = 0; n < jpeg.size(); n += 7) {
    auto r = Probe(Bytes(jpeg.substr(0, n)), {.check_structure = true});
    EXPECT_FALSE(r.ok());
  }
}

TEST(Decode, JpegRoundTripIsClose) {
  Image src = Pattern(64, 40, 3);
  auto jpeg = EncodeJpeg(src, {.quality = 95, .subsampling = ChromaSubsampling::k444});
  ASSERT_TRUE(jpeg.ok());
  auto back = Decode(Bytes(*jpeg));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->pixels.size(), src.pixels.size());
  double err = 0;
  for (size_t i = 0; i < src.pixels.size(); ++i) err += std::abs(back->pixels[i] - src.pixels[i]);
  EXPECT_LT(err / src.pixels.size(), 3.0);
  // Channel conversion on decode.
  auto gray = Decode(Bytes(*jpeg), {.desired_channels = 1});
  ASSERT_TRUE(gray.ok());
  EXPECT_EQ(gray->channels, 1);
  auto rgb_from_gray = Decode(Bytes(Jpeg(8, 8, 1)), {.desired_channels = 3});
  ASSERT_TRUE(rgb_from_gray.ok());
  EXPECT_EQ(rgb_from_gray->channels, 3);
}

TEST(Decode, DctScalingKeepsTheRequestedShorterSide) {
  const std::string jpeg = Jpeg(400, 300, 3);
  for (auto [min_side, w, h] :
       {std::tuple{0, 400, 300}, std::tuple{300, 400, 300}, std::tuple{150, 200, 150},
        std::tuple{100, 200, 150}, std::tuple{75, 100, 75}, std::tuple{30, 50, 38},
        std::tuple{1, 50, 38}}) {
    auto img = Decode(Bytes(jpeg), {.min_shorter_side = min_side});
    ASSERT_TRUE(img.ok()) << img.status().ToString();
    EXPECT_EQ(img->width, w) << min_side;
    EXPECT_EQ(img->height, h) << min_side;
  }
}

TEST(Decode, PixelLimitRefusesBeforeAllocating) {
  auto r = Decode(Bytes(Jpeg(100, 100, 3)), {.max_pixels = 9999});
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("100x100"), std::string::npos);
}

TEST(Decode, Bmp24BottomUp) {
  // 2x2, 24-bit, bottom-up rows padded to 4 bytes.
  std::string bmp = "BM";
  auto le32 = [](uint32_t v) {
    return std::string{char(v), char(v >> 8), char(v >> 16), char(v >> 24)};
  };
  auto le16 = [](uint16_t v) { return std::string{char(v), char(v >> 8)}; };
  std::string pixels;
  pixels +=
      std::string("\x00\x00\xff\x00\xff\x00", 6) + std::string(2, '\0');  // bottom: red, green
  pixels += std::string("\xff\x00\x00\xff\xff\xff", 6) + std::string(2, '\0');  // top: blue, white
  bmp += le32(54 + pixels.size()) + le32(0) + le32(54);
  bmp += le32(40) + le32(2) + le32(2) + le16(1) + le16(24) + le32(0) + le32(pixels.size()) +
         le32(2835) + le32(2835) + le32(0) + le32(0);
  bmp += pixels;
  auto info = Probe(Bytes(bmp));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->format, ImageFormat::kBmp);
  auto img = Decode(Bytes(bmp));
  ASSERT_TRUE(img.ok()) << img.status().ToString();
  const uint8_t expected[] = {0, 0, 255, 255, 255, 255, 255, 0, 0, 0, 255, 0};
  EXPECT_EQ(std::vector<uint8_t>(img->pixels.begin(), img->pixels.end()),
            std::vector<uint8_t>(std::begin(expected), std::end(expected)));
  EXPECT_EQ(Decode(Bytes(bmp.substr(0, 60))).status().code(), StatusCode::kDataLoss);
}

TEST(Resize, ConstantStaysConstantAndSizesAreExact) {
  Image flat;
  flat.width = 37;
  flat.height = 21;
  flat.channels = 3;
  flat.pixels.assign(flat.row_bytes() * flat.height, 77);
  for (auto filter : {ResizeFilter::kBilinearAntialias, ResizeFilter::kArea}) {
    for (auto [w, h] : {std::pair{10, 6}, std::pair{80, 50}, std::pair{1, 1}, std::pair{37, 5}}) {
      auto out = Resize(flat, w, h, {filter});
      ASSERT_TRUE(out.ok());
      EXPECT_EQ(out->width, w);
      EXPECT_EQ(out->height, h);
      for (uint8_t v : out->pixels) ASSERT_EQ(v, 77);
    }
  }
  EXPECT_EQ(Resize(flat, 0, 5).status().code(), StatusCode::kInvalidArgument);
}

TEST(Resize, ShrinkingAveragesInsteadOfAliasing) {
  // A one-pixel checkerboard shrunk 4x must become mid-gray, not black or white.
  Image board;
  board.width = board.height = 64;
  board.channels = 1;
  board.pixels.resize(64 * 64);
  for (int y = 0; y < 64; ++y)
    for (int x = 0; x < 64; ++x) board.row(y)[x] = ((x + y) % 2) * 255;
  for (auto filter : {ResizeFilter::kBilinearAntialias, ResizeFilter::kArea}) {
    auto out = Resize(board, 16, 16, {filter});
    ASSERT_TRUE(out.ok());
    for (uint8_t v : out->pixels) EXPECT_NEAR(v, 128, 8);
  }
}

TEST(SizeForShorterSide, KeepsAspect) {
  int w, h;
  SizeForShorterSide(500, 375, 256, &w, &h);
  EXPECT_EQ(w, 341);
  EXPECT_EQ(h, 256);
  SizeForShorterSide(300, 600, 100, &w, &h);
  EXPECT_EQ(w, 100);
  EXPECT_EQ(h, 200);
}

TEST(EncodeJpeg, Deterministic) {
  Image img = Pattern(33, 17, 3);
  EXPECT_EQ(*EncodeJpeg(img), *EncodeJpeg(img));
  EXPECT_EQ(EncodeJpeg(img, {.quality = 0}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeJpeg(Image{}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace recordflow::image
