// Helpers shared by the image layer's tests: byte views, and hand-made (often lying) JPEG and
// PNG bytes.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <span>
#include <string>

#include <gtest/gtest.h>

#include "recordflow/image/image.h"

namespace recordflow::image::testing_util {

// A w x h image of `channels` interleaved 8-bit channels, every pixel 0: for a test to fill.
inline Image BlankImage(int w, int h, int channels) {
  Image img;
  img.width = w;
  img.height = h;
  img.channels = channels;
  img.pixels.resize(img.row_bytes() * h);
  return img;
}

inline std::span<const std::byte> Bytes(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

inline bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// `jpeg` with the height/width of its SOF0 segment rewritten.
inline std::string WithJpegSize(std::string jpeg, int width, int height) {
  const size_t sof = jpeg.find("\xff\xc0");
  EXPECT_NE(sof, std::string::npos);
  if (sof == std::string::npos) return jpeg;
  jpeg[sof + 5] = static_cast<char>(height >> 8);
  jpeg[sof + 6] = static_cast<char>(height);
  jpeg[sof + 7] = static_cast<char>(width >> 8);
  jpeg[sof + 8] = static_cast<char>(width);
  return jpeg;
}

// `v` as 4 big-endian bytes.
inline std::string Be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

// One PNG chunk (length, type, data, CRC-32 of type and data).
inline std::string PngChunk(const std::string& type, const std::string& data) {
  const std::string body = type + data;
  const uLong crc = crc32(0, reinterpret_cast<const Bytef*>(body.data()), body.size());
  return Be32(static_cast<uint32_t>(data.size())) + body + Be32(static_cast<uint32_t>(crc));
}

// zlib's compress() of `raw`: the data of a PNG's IDAT chunks.
inline std::string ZlibCompress(const std::string& raw) {
  std::string packed(compressBound(raw.size()), '\0');
  uLongf n = packed.size();
  EXPECT_EQ(compress(reinterpret_cast<Bytef*>(packed.data()), &n,
                     reinterpret_cast<const Bytef*>(raw.data()), raw.size()),
            Z_OK);
  packed.resize(n);
  return packed;
}

// A valid-CRC gray 8-bit PNG claiming width x height, whose one IDAT holds `raw` (each row's
// filter byte and samples, compressed here), with `extra_chunks` (whole chunks, PngChunk)
// between IHDR and IDAT.
inline std::string GrayPng(uint32_t width, uint32_t height, const std::string& raw,
                           const std::string& extra_chunks = "") {
  const std::string ihdr = Be32(width) + Be32(height) + std::string("\x08\x00\x00\x00\x00", 5);
  return std::string("\x89PNG\r\n\x1a\n", 8) + PngChunk("IHDR", ihdr) + extra_chunks +
         PngChunk("IDAT", ZlibCompress(raw)) + PngChunk("IEND", "");
}

}  // namespace recordflow::image::testing_util
