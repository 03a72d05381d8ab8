// PNG decoding against tf.io.decode_png: testdata/golden/png/ holds small PNGs (16-bit, gray +
// alpha, palette, gAMA / cHRM / sRGB / iCCP chunks) and manifest.txt the samples TensorFlow
// decodes from each (written by testdata/golden/make_png_golden.py). Every PNG decode path
// must give them exactly: no gamma conversion, 16 -> 8 bits by the high byte.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "recordflow/image/image.h"
#include "recordflow/image/ops.h"

namespace recordflow::image {
namespace {

const std::string kPngDir = std::string(RF_TESTDATA_DIR) + "/golden/png";

struct GoldenDecode {
  std::string file;
  bool sixteen = false;
  int channels_requested = 0;
  int height = 0, width = 0, channels = 0;
  std::vector<int> samples;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<GoldenDecode> LoadManifest() {
  std::vector<GoldenDecode> out;
  std::istringstream lines(ReadFile(kPngDir + "/manifest.txt"));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    std::string tag, dtype;
    GoldenDecode g;
    f >> tag >> g.file >> dtype >> g.channels_requested >> g.height >> g.width >> g.channels;
    g.sixteen = dtype == "uint16";
    for (int v; f >> v;) g.samples.push_back(v);
    EXPECT_EQ(g.samples.size(), static_cast<size_t>(g.height) * g.width * g.channels) << line;
    out.push_back(std::move(g));
  }
  return out;
}

std::span<const std::byte> Bytes(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

// How many samples differ, and the first one that does.
template <typename T>
std::string Compare(const std::vector<T>& got, const std::vector<int>& want) {
  if (got.size() != want.size()) {
    return "size " + std::to_string(got.size()) + " != " + std::to_string(want.size());
  }
  int wrong = 0;
  std::string first;
  for (size_t i = 0; i < got.size(); ++i) {
    if (static_cast<int>(got[i]) != want[i]) {
      if (wrong++ == 0) {
        first = "sample " + std::to_string(i) + ": " + std::to_string(got[i]) +
                " != " + std::to_string(want[i]);
      }
    }
  }
  return wrong == 0 ? "" : std::to_string(wrong) + " samples differ, first " + first;
}

// A decoded image (8- or 16-bit samples) against TensorFlow's decode of the same file.
template <typename DecodedImage>
void ExpectDecodedAsGolden(const Result<DecodedImage>& img, const GoldenDecode& g) {
  ASSERT_TRUE(img.ok()) << img.status().ToString();
  EXPECT_EQ(img->width, g.width);
  EXPECT_EQ(img->height, g.height);
  EXPECT_EQ(img->channels, g.channels);
  EXPECT_EQ(Compare(img->pixels, g.samples), "");
}

TEST(PngGolden, ManifestCoversTheCases) {
  const auto golden = LoadManifest();
  EXPECT_EQ(golden.size(), 60u);
}

TEST(PngGolden, DecodeMatchesTensorFlow) {
  for (const GoldenDecode& g : LoadManifest()) {
    SCOPED_TRACE(g.file + (g.sixteen ? " uint16" : " uint8") +
                 " channels=" + std::to_string(g.channels_requested));
    const std::string png = ReadFile(kPngDir + "/" + g.file);
    DecodeOptions o;
    o.desired_channels = g.channels_requested;
    if (g.sixteen) {
      ExpectDecodedAsGolden(Decode16(Bytes(png), o), g);
    } else {
      ExpectDecodedAsGolden(Decode(Bytes(png), o), g);
    }
  }
}

// The presets' and rf.vision's path: ImageDecoder (whole and cropped) and DecodeImageRgb.
TEST(PngGolden, RegionDecodeMatchesTensorFlow) {
  ImageDecoder decoder;
  for (const GoldenDecode& g : LoadManifest()) {
    if (g.sixteen || g.channels_requested != 3) continue;
    SCOPED_TRACE(g.file);
    const std::string png = ReadFile(kPngDir + "/" + g.file);
    auto rgb = DecodeImageRgb(Bytes(png));
    ASSERT_TRUE(rgb.ok()) << rgb.status().ToString();
    EXPECT_EQ(Compare(rgb->pixels, g.samples), "");
    RegionDecodeOptions o;
    o.crop = Rect{1, 2, 3, 2};
    DecodedRegion region;
    ASSERT_TRUE(decoder.DecodeRegion(Bytes(png), o, &region).ok());
    std::vector<int> want;
    for (int y = 2; y < 4; ++y) {
      for (int x = 1; x < 4; ++x) {
        for (int c = 0; c < 3; ++c) want.push_back(g.samples[(y * g.width + x) * 3 + c]);
      }
    }
    EXPECT_EQ(Compare(region.image.pixels, want), "");
  }
}

}  // namespace
}  // namespace recordflow::image
