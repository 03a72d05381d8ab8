// Safety limits and strict checks of the image layer: GIF frames and progressive-JPEG scans
// under their CPU limits, crop windows checked as TensorFlow checks them, and the structural
// check (ProbeOptions::check_structure, convert's default --verify structure) catching lying
// JPEG headers and truncated or CRC-broken PNG, GIF and BMP files.
#include <zlib.h>

#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "recordflow/image/image.h"
#include "recordflow/image/image_test_util.h"
#include "recordflow/image/libjpeg_test_util.h"
#include "recordflow/image/ops.h"

namespace recordflow::image {
namespace {

using testing_util::Be32;
using testing_util::Bytes;
using testing_util::Contains;
using testing_util::GrayPng;
using testing_util::PngChunk;
using testing_util::WithJpegSize;

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Image Gradient(int w, int h, int channels) {
  Image img = testing_util::BlankImage(w, h, channels);
  for (size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = static_cast<uint8_t>(i * 7);
  return img;
}

// ---- GIF ------------------------------------------------------------------------------------

std::string Le16(int v) { return {static_cast<char>(v & 255), static_cast<char>(v >> 8)}; }

// LZW data for `pixels` (values 0..3) with a 2-bit minimum code size: a clear code before
// every second literal keeps the code width at 3 bits, so no dictionary is needed.
std::string GifLzw(const std::vector<int>& pixels) {
  std::vector<int> codes;
  for (size_t i = 0; i < pixels.size(); ++i) {
    if (i % 2 == 0) codes.push_back(4);  // clear
    codes.push_back(pixels[i]);
  }
  codes.push_back(5);  // end of information
  std::string bytes;
  uint32_t acc = 0;
  int bits = 0;
  for (int code : codes) {
    acc |= static_cast<uint32_t>(code) << bits;
    bits += 3;
    while (bits >= 8) {
      bytes += static_cast<char>(acc & 255);
      acc >>= 8;
      bits -= 8;
    }
  }
  if (bits > 0) bytes += static_cast<char>(acc & 255);
  std::string blocks = "\x02";  // minimum code size
  for (size_t at = 0; at < bytes.size(); at += 255) {
    const std::string part = bytes.substr(at, 255);
    blocks += static_cast<char>(part.size()) + part;
  }
  return blocks + '\0';
}

// A GIF89a with a screen_w x screen_h logical screen and one frame of frame_w x frame_h at
// (0, 0) whose pixels are `pixels` (or, when empty, just a few LZW bytes).
std::string Gif(int screen_w, int screen_h, int frame_w, int frame_h,
                const std::vector<int>& pixels) {
  std::string gif = "GIF89a" + Le16(screen_w) + Le16(screen_h) + "\xF1" + std::string(2, '\0');
  gif += std::string("\x00\x00\x00\xFF\x00\x00\x00\xFF\x00\x00\x00\xFF", 12);  // 4 colors
  gif += "\x2C" + Le16(0) + Le16(0) + Le16(frame_w) + Le16(frame_h) + '\0';
  gif += GifLzw(pixels.empty() ? std::vector<int>{1, 2, 3, 0} : pixels);
  return gif + "\x3B";
}

TEST(GifFrameLimit, HonestGifDecodes) {
  const std::vector<int> pixels = {0, 1, 2, 3, 3, 2};
  auto img = Decode(Bytes(Gif(3, 2, 3, 2, pixels)));
  ASSERT_TRUE(img.ok()) << img.status().ToString();
  ASSERT_EQ(img->width, 3);
  ASSERT_EQ(img->height, 2);
  // Palette: 0 black, 1 red, 2 green, 3 blue.
  const uint8_t want[18] = {0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 255, 0, 255, 0};
  EXPECT_EQ(std::vector<uint8_t>(img->pixels.begin(), img->pixels.end()),
            std::vector<uint8_t>(want, want + 18));
}

TEST(GifFrameLimit, HugeFrameOnTinyScreenIsRefusedQuickly) {
  const std::string gif = Gif(1, 1, 65535, 65535, {});
  const auto t0 = std::chrono::steady_clock::now();
  auto img = Decode(Bytes(gif), {.max_pixels = 1000});
  EXPECT_EQ(img.status().code(), StatusCode::kResourceExhausted) << img.status().ToString();
  EXPECT_TRUE(Contains(img.status().message(), "65535x65535")) << img.status().message();
  EXPECT_TRUE(Contains(img.status().message(), "1000")) << img.status().message();
  EXPECT_LT(SecondsSince(t0), 1.0);
  // The same through the presets' decoder.
  ImageDecoder decoder;
  DecodedRegion region;
  RegionDecodeOptions o;
  o.max_pixels = 1000;
  Status s = decoder.DecodeRegion(Bytes(gif), o, &region);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
}

TEST(GifFrameLimit, FrameFarLargerThanTheScreenIsRefusedUnderTheDefaultLimit) {
  // 4096x4096 = 16.7 MP (under the default max_pixels) drawn on a 2x2 screen.
  auto img = Decode(Bytes(Gif(2, 2, 4096, 4096, {})));
  EXPECT_EQ(img.status().code(), StatusCode::kResourceExhausted) << img.status().ToString();
  EXPECT_TRUE(Contains(img.status().message(), "logical screen")) << img.status().message();
}

// ---- progressive scans ------------------------------------------------------------------------

// `img` (gray or RGB) encoded by libjpeg with the scan script `script`.
std::string JpegWithScans(const Image& img, const std::vector<jpeg_scan_info>& script) {
  return testing_util::LibjpegEncode(img, img.channels == 1 ? JCS_GRAYSCALE : JCS_RGB,
                                     [&script](jpeg_compress_struct& c) {
                                       c.scan_info = script.data();
                                       c.num_scans = static_cast<int>(script.size());
                                     });
}

// A valid progressive grayscale JPEG with 11 DC scans (Al 10..0, libjpeg's range for 8-bit
// samples) and 11 scans for each of the 63 AC coefficients: 704 scans, every one of them legal
// successive approximation.
std::string ManyScanJpeg(int w, int h) {
  std::vector<jpeg_scan_info> script;
  for (int al = 10; al >= 0; --al) {
    jpeg_scan_info s{};
    s.comps_in_scan = 1;
    s.Ss = 0, s.Se = 0, s.Ah = al == 10 ? 0 : al + 1, s.Al = al;
    script.push_back(s);
  }
  for (int k = 1; k < 64; ++k) {
    for (int al = 10; al >= 0; --al) {
      jpeg_scan_info s{};
      s.comps_in_scan = 1;
      s.Ss = k, s.Se = k, s.Ah = al == 10 ? 0 : al + 1, s.Al = al;
      script.push_back(s);
    }
  }
  return JpegWithScans(Gradient(w, h, 1), script);
}

// 3 components x 64 coefficients x 11 successive-approximation scans = 2,112 scans, each a
// pass over every block of its component. Refused before the first scan is decoded (by
// counting SOS markers), not after 500 of them (2.2 s for a 2048x2048 image so).
std::string ManyScanColorJpeg(int w, int h) {
  std::vector<jpeg_scan_info> script;
  for (int comp = 0; comp < 3; ++comp) {
    for (int k = 0; k < 64; ++k) {
      for (int al = 10; al >= 0; --al) {
        jpeg_scan_info s{};
        s.comps_in_scan = 1;
        s.component_index[0] = comp;
        s.Ss = k, s.Se = k, s.Ah = al == 10 ? 0 : al + 1, s.Al = al;
        script.push_back(s);
      }
    }
  }
  return JpegWithScans(Gradient(w, h, 3), script);
}

TEST(ProgressiveScanLimit, LargeManyScanImageIsRefusedBeforeDecodingAnyScan) {
  const std::string jpeg = ManyScanColorJpeg(256, 256);
  const auto t0 = std::chrono::steady_clock::now();
  auto img = Decode(Bytes(jpeg));
  EXPECT_EQ(img.status().code(), StatusCode::kResourceExhausted) << img.status().ToString();
  // The count in the message shows the refusal came from the count, before decoding.
  EXPECT_TRUE(Contains(img.status().message(), "2112 scans")) << img.status().message();
  ImageDecoder decoder;
  DecodedRegion region;
  RegionDecodeOptions o;
  o.crop = Rect{0, 0, 224, 224};
  o.target_width = o.target_height = 224;
  Status s = decoder.DecodeRegion(Bytes(jpeg), o, &region);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "2112 scans")) << s.message();
  EXPECT_LT(SecondsSince(t0), 0.5);
}

TEST(ProgressiveScanLimit, ThousandsOfScansAreRefusedByDefault) {
  const std::string jpeg = ManyScanJpeg(64, 48);
  auto info = Probe(Bytes(jpeg), {.check_structure = true});
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_TRUE(info->progressive);

  auto img = Decode(Bytes(jpeg));
  EXPECT_EQ(img.status().code(), StatusCode::kResourceExhausted) << img.status().ToString();
  EXPECT_TRUE(Contains(img.status().message(), "704 scans")) << img.status().message();
  EXPECT_TRUE(Contains(img.status().message(), "500 scans")) << img.status().message();
  ImageDecoder decoder;
  DecodedRegion region;
  RegionDecodeOptions o;
  Status s = decoder.DecodeRegion(Bytes(jpeg), o, &region);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "500 scans")) << s.message();
  // The decoder is reusable afterwards, and the limit is an option: the file itself is valid.
  o.max_scans = 1000;
  s = decoder.DecodeRegion(Bytes(jpeg), o, &region);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(region.image.width, 64);
  auto full = Decode(Bytes(jpeg), {.max_scans = 1000});
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ(full->height, 48);
  // Ordinary progressive files (10 scans) are untouched by the default.
  JpegEncodeOptions progressive;
  progressive.progressive = true;
  auto usual = EncodeJpeg(Gradient(40, 30, 3), progressive);
  ASSERT_TRUE(usual.ok());
  EXPECT_TRUE(Decode(Bytes(*usual)).ok());
}

// ---- crop windows -------------------------------------------------------------------------------

TEST(CropWindow, InvalidWindowsAreInvalidArgumentInEveryFormat) {
  auto jpeg = EncodeJpeg(Gradient(30, 20, 3), {});
  ASSERT_TRUE(jpeg.ok());
  const std::vector<std::string> images = {*jpeg, Gif(30, 20, 30, 20, std::vector<int>(600, 1))};
  // (x, y, width, height): each one TF's decode_and_crop_jpeg and crop_to_bounding_box refuse.
  const std::vector<Rect> bad = {{0, 0, 0, 5},   {0, 0, 5, 0},   {0, 0, -5, 5}, {-1, 0, 5, 5},
                                 {0, -1, 5, 5},  {30, 0, 1, 1},  {0, 20, 1, 1}, {0, 15, 5, 10},
                                 {25, 0, 10, 5}, {0, 0, 31, 20}, {0, 0, 0, 0}};
  ImageDecoder decoder;
  DecodedRegion region;
  for (const std::string& data : images) {
    for (const Rect& r : bad) {
      SCOPED_TRACE(std::to_string(r.x) + "," + std::to_string(r.y) + "," + std::to_string(r.width) +
                   "," + std::to_string(r.height));
      RegionDecodeOptions o;
      o.crop = r;
      Status s = decoder.DecodeRegion(Bytes(data), o, &region);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
      EXPECT_TRUE(Contains(s.message(), "30x20")) << s.message();
      EXPECT_TRUE(Contains(s.message(), "width=" + std::to_string(r.width))) << s.message();
      EXPECT_FALSE(CheckCropWindow(r, 30, 20).ok());
    }
    // The edges themselves are fine.
    RegionDecodeOptions o;
    o.crop = Rect{29, 19, 1, 1};
    ASSERT_TRUE(decoder.DecodeRegion(Bytes(data), o, &region).ok());
    EXPECT_EQ(region.image.width, 1);
    o.crop = Rect{0, 0, 30, 20};
    ASSERT_TRUE(decoder.DecodeRegion(Bytes(data), o, &region).ok());
    EXPECT_EQ(region.image.width, 30);
  }
}

// ---- structural check ---------------------------------------------------------------------------

Status Structure(const std::string& data) {
  return Probe(Bytes(data), {.check_structure = true}).status();
}

TEST(StructureCheck, JpegHeaderClaimingFarMoreThanItsScanHolds) {
  auto small = EncodeJpeg(Gradient(32, 24, 3), {});
  ASSERT_TRUE(small.ok());
  ASSERT_TRUE(Structure(*small).ok());
  for (auto [w, h] : {std::pair{8000, 8000}, std::pair{2000, 1500}}) {
    Status s = Structure(WithJpegSize(*small, w, h));
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
    EXPECT_TRUE(Contains(s.message(), std::to_string(w) + "x" + std::to_string(h))) << s.message();
    // The header-only probe still reads the (lying) header.
    EXPECT_TRUE(Probe(Bytes(WithJpegSize(*small, w, h))).ok());
  }
  // A header with no scan at all.
  const size_t sos = small->find("\xff\xda");
  Status s = Structure(small->substr(0, sos) + "\xff\xd9");
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  // A scan cut to a fraction of the least its blocks need, with an end marker glued on.
  auto big = EncodeJpeg(Gradient(320, 240, 3), {});
  ASSERT_TRUE(big.ok());
  const size_t big_sos = big->find("\xff\xda");
  s = Structure(big->substr(0, big_sos + 14 + 100) + "\xff\xd9");
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
}

TEST(StructureCheck, RealJpegsOfEveryKindPass) {
  for (int channels : {1, 3}) {
    for (bool progressive : {false, true}) {
      for (auto sub : {ChromaSubsampling::k420, ChromaSubsampling::k444}) {
        JpegEncodeOptions o;
        o.progressive = progressive;
        o.subsampling = sub;
        o.quality = 10;  // the fewest bits per block a real encoder writes
        Image flat = Gradient(517, 333, channels);
        std::fill(flat.pixels.begin(), flat.pixels.end(), 77);
        auto jpeg = EncodeJpeg(flat, o);
        ASSERT_TRUE(jpeg.ok());
        Status s = Structure(*jpeg);
        EXPECT_TRUE(s.ok()) << channels << " " << progressive << " " << s.ToString();
      }
    }
  }
  EXPECT_TRUE(Structure(ManyScanJpeg(64, 48)).ok());
}

std::string Png(uint32_t width, uint32_t height) {
  std::string raw;
  for (uint32_t y = 0; y < height; ++y) {
    raw += '\0';
    for (uint32_t x = 0; x < width; ++x) raw += static_cast<char>(x * 31 + y * 17);
  }
  return GrayPng(width, height, raw, PngChunk("tEXt", std::string("k\0v", 3)));
}

TEST(StructureCheck, TruncatedOrCrcBrokenPng) {
  const std::string png = Png(40, 30);
  ASSERT_TRUE(Structure(png).ok()) << Structure(png).ToString();
  ASSERT_TRUE(Decode(Bytes(png)).ok());
  for (size_t cut : {png.size() - 12, png.size() - 20, size_t{60}}) {
    Status s = Structure(png.substr(0, cut));
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << cut << " " << s.ToString();
  }
  // One flipped bit in each chunk's data or CRC (the IHDR's, an ancillary one's, IDAT's).
  const size_t idat = png.find("IDAT");
  for (size_t at : {size_t{20}, size_t{29}, size_t{43}, idat + 10, png.size() - 13}) {
    std::string bad = png;
    bad[at] = static_cast<char>(bad[at] ^ 0x10);
    Status s = Structure(bad);
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << at << " " << s.ToString();
    if (at != 20) EXPECT_TRUE(Contains(s.message(), "CRC")) << s.message();
  }
  // IDAT whose data inflates to fewer rows than the header says.
  const std::string short_rows = Png(40, 30);
  std::string lying = short_rows;
  lying[16 + 7] = 60;  // height 30 -> 60 (and IHDR's CRC fixed below)
  const std::string ihdr_body = lying.substr(12, 17);
  const uLong crc = crc32(0, reinterpret_cast<const Bytef*>(ihdr_body.data()), 17);
  lying.replace(29, 4, Be32(static_cast<uint32_t>(crc)));
  Status s = Structure(lying);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
}

TEST(StructureCheck, TruncatedGifAndBmp) {
  const std::string gif = Gif(3, 2, 3, 2, {0, 1, 2, 3, 3, 2});
  ASSERT_TRUE(Structure(gif).ok()) << Structure(gif).ToString();
  for (size_t cut : {gif.size() - 1, gif.size() - 3, size_t{20}, size_t{30}}) {
    Status s = Structure(gif.substr(0, cut));
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << cut << " " << s.ToString();
  }
  auto le32 = [](uint32_t v) {
    return std::string{char(v), char(v >> 8), char(v >> 16), char(v >> 24)};
  };
  auto le16 = [](uint16_t v) { return std::string{char(v), char(v >> 8)}; };
  // 4x3 24-bit: rows of 12 bytes, no padding.
  std::string bmp = "BM" + le32(54 + 36) + le32(0) + le32(54);
  bmp += le32(40) + le32(4) + le32(3) + le16(1) + le16(24) + le32(0) + le32(36) + le32(2835) +
         le32(2835) + le32(0) + le32(0) + std::string(36, '\x40');
  ASSERT_TRUE(Structure(bmp).ok()) << Structure(bmp).ToString();
  ASSERT_TRUE(Decode(Bytes(bmp)).ok());
  Status s = Structure(bmp.substr(0, bmp.size() - 5));
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
}

}  // namespace
}  // namespace recordflow::image
