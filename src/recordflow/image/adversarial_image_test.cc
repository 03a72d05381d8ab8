// Images whose headers lie: gigapixel dimensions on a few hundred bytes (refused by the pixel
// limit before any allocation) and dimensions larger than the data behind them (kDataLoss, not
// a read past the end or an allocation of what the header claims).
#include <string>

#include <gtest/gtest.h>

#include "recordflow/image/image.h"
#include "recordflow/image/image_test_util.h"
#include "recordflow/image/ops.h"

namespace recordflow::image {
namespace {

using testing_util::Bytes;
using testing_util::Contains;
using testing_util::GrayPng;
using testing_util::WithJpegSize;

std::string SmallJpeg() {
  Image img;
  img.width = 32;
  img.height = 24;
  img.channels = 3;
  img.pixels.assign(img.row_bytes() * img.height, 128);
  auto jpeg = EncodeJpeg(img, {});
  EXPECT_TRUE(jpeg.ok());
  return *jpeg;
}

// A valid-CRC gray 8-bit PNG claiming width x height, with `rows` real rows of pixel data.
std::string LyingPng(uint32_t width, uint32_t height, uint32_t rows) {
  std::string raw;
  for (uint32_t y = 0; y < rows; ++y) raw += '\0' + std::string(width, '\x80');
  return GrayPng(width, height, raw);
}

TEST(AdversarialImageTest, GigapixelJpegHeaderIsRefusedBeforeDecoding) {
  const std::string jpeg = WithJpegSize(SmallJpeg(), 65500, 65500);  // 4.3 gigapixels
  ASSERT_LT(jpeg.size(), 2000u);
  auto info = Probe(Bytes(jpeg));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->pixels(), uint64_t{65500} * 65500);

  auto full = Decode(Bytes(jpeg));
  EXPECT_EQ(full.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(Contains(full.status().message(), "65500x65500")) << full.status().message();

  ImageDecoder decoder;
  DecodedRegion region;
  RegionDecodeOptions options;
  options.crop = {0, 0, 224, 224};
  Status s = decoder.DecodeRegion(Bytes(jpeg), options, &region);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "65500x65500")) << s.message();
}

TEST(AdversarialImageTest, JpegHeaderLargerThanItsDataIsDataLoss) {
  // 2000x1500 claimed (under the pixel limit), 32x24 of entropy-coded data behind it.
  const std::string jpeg = WithJpegSize(SmallJpeg(), 2000, 1500);
  auto full = Decode(Bytes(jpeg));
  EXPECT_EQ(full.status().code(), StatusCode::kDataLoss) << full.status().ToString();

  ImageDecoder decoder;
  DecodedRegion region;
  RegionDecodeOptions options;
  Status s = decoder.DecodeRegion(Bytes(jpeg), options, &region);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  // Counted instead of failing, when the caller asks: the image decodes (padded) with warnings.
  options.warnings = JpegWarnings::kCount;
  s = decoder.DecodeRegion(Bytes(jpeg), options, &region);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_GT(region.warnings, 0);
  EXPECT_EQ(region.image.width, 2000);
}

TEST(AdversarialImageTest, GigapixelPngHeaderIsRefusedBeforeDecoding) {
  const std::string png = LyingPng(100000, 100000, 1);  // 10 gigapixels, valid CRCs
  auto info = Probe(Bytes(png));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  auto full = Decode(Bytes(png));
  EXPECT_EQ(full.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(Contains(full.status().message(), "100000x100000")) << full.status().message();
}

TEST(AdversarialImageTest, PngHeaderLargerThanItsDataIsDataLoss) {
  const std::string honest = LyingPng(300, 200, 200);
  auto ok = Decode(Bytes(honest));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->width, 300);

  const std::string png = LyingPng(300, 4000, 2);  // 1.2 MP claimed, 2 rows present
  auto full = Decode(Bytes(png));
  EXPECT_EQ(full.status().code(), StatusCode::kDataLoss) << full.status().ToString();
}

TEST(AdversarialImageTest, BmpClaimingMoreRowsThanItHoldsIsDataLossUnderARaisedLimit) {
  // 30000x30000 24-bit (2.7 GB of pixels) in a 60-byte file, with the pixel limit raised so
  // that only the size check against the data stands between the header and an allocation.
  auto le32 = [](uint32_t v) {
    return std::string{char(v), char(v >> 8), char(v >> 16), char(v >> 24)};
  };
  auto le16 = [](uint16_t v) { return std::string{char(v), char(v >> 8)}; };
  std::string bmp = "BM" + le32(60) + le32(0) + le32(54);
  bmp += le32(40) + le32(30000) + le32(30000) + le16(1) + le16(24) + le32(0) + le32(0) +
         le32(2835) + le32(2835) + le32(0) + le32(0) + std::string(6, '\x7f');
  auto full = Decode(Bytes(bmp), {.max_pixels = uint64_t{1} << 32});
  EXPECT_EQ(full.status().code(), StatusCode::kDataLoss) << full.status().ToString();
  EXPECT_TRUE(Contains(full.status().message(), "truncated BMP pixel data"));
  // Under the default limit it is refused as too large first.
  EXPECT_EQ(Decode(Bytes(bmp)).status().code(), StatusCode::kResourceExhausted);
}

TEST(AdversarialImageTest, ZeroByteAndZeroDimensionImages) {
  EXPECT_EQ(Decode(Bytes("")).status().code(), StatusCode::kInvalidArgument);
  const std::string zero = WithJpegSize(SmallJpeg(), 0, 24);
  auto r = Decode(Bytes(zero));
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.status().code() == StatusCode::kDataLoss ||
              r.status().code() == StatusCode::kUnimplemented)
      << r.status().ToString();
  auto png = Decode(Bytes(LyingPng(0, 0, 0)));
  EXPECT_EQ(png.status().code(), StatusCode::kDataLoss) << png.status().ToString();
}

}  // namespace
}  // namespace recordflow::image
