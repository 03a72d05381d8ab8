// What Probe reads from a PNG's IHDR color type: each type PNG defines and the ones it does not.
#include <cstddef>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "recordflow/image/image.h"

namespace recordflow::image {
namespace {

// The signature and an IHDR chunk of a 3x2 image (CRC not checked without check_structure).
std::vector<std::byte> PngHeader(int color_type) {
  const unsigned char bytes[] = {0x89, 'P',
                                 'N',  'G',
                                 '\r', '\n',
                                 0x1A, '\n',  // signature
                                 0,    0,
                                 0,    13,
                                 'I',  'H',
                                 'D',  'R',  // length, type
                                 0,    0,
                                 0,    3,
                                 0,    0,
                                 0,    2,  // width, height
                                 8,    static_cast<unsigned char>(color_type),
                                 0,    0,
                                 0,  // depth..
                                 0,    0,
                                 0,    0};  // CRC
  std::vector<std::byte> out;
  for (unsigned char b : bytes) out.push_back(static_cast<std::byte>(b));
  return out;
}

TEST(PngColorTypeTest, EachDefinedTypeGivesItsChannelsAndColorspace) {
  const struct {
    int type;
    int channels;
    ColorSpace colorspace;
  } kCases[] = {{0, 1, ColorSpace::kGray},
                {2, 3, ColorSpace::kRGB},
                {3, 3, ColorSpace::kRGB},
                {4, 2, ColorSpace::kGrayAlpha},
                {6, 4, ColorSpace::kRGBA}};
  for (const auto& c : kCases) {
    Result<ImageInfo> info = Probe(PngHeader(c.type));
    ASSERT_TRUE(info.ok()) << c.type << ": " << info.status().ToString();
    EXPECT_EQ(info->format, ImageFormat::kPng);
    EXPECT_EQ(info->width, 3);
    EXPECT_EQ(info->height, 2);
    EXPECT_EQ(info->channels, c.channels) << c.type;
    EXPECT_EQ(info->colorspace, c.colorspace) << c.type;
  }
}

TEST(PngColorTypeTest, UndefinedTypesAreDataLossNamingTheType) {
  for (int type : {1, 5, 7, 8, 255}) {
    Result<ImageInfo> info = Probe(PngHeader(type));
    ASSERT_FALSE(info.ok()) << type;
    EXPECT_EQ(info.status().code(), StatusCode::kDataLoss);
    EXPECT_EQ(info.status().message(), "malformed PNG: bad color type " + std::to_string(type));
  }
}

}  // namespace
}  // namespace recordflow::image
