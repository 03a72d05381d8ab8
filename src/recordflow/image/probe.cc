// Format sniffing and header probes. Every read is bounds-checked through Reader: the input
// is untrusted (see fuzz/image_probe_fuzzer.cc).
//
// Over 600 lines: one probe and one structure check per format (JPEG, PNG, GIF, BMP, WebP),
// all on the bounds-checked Reader defined here; one file per format is the planned split.
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "image_internal.h"
#include "recordflow/core/enum_names.h"
#include "recordflow/image/image.h"

namespace recordflow::image {
namespace {

uint8_t U8(std::span<const std::byte> d, size_t i) { return static_cast<uint8_t>(d[i]); }
uint32_t Be16(std::span<const std::byte> d, size_t i) { return (U8(d, i) << 8) | U8(d, i + 1); }
uint32_t Le16(std::span<const std::byte> d, size_t i) { return U8(d, i) | (U8(d, i + 1) << 8); }
uint32_t Le24(std::span<const std::byte> d, size_t i) { return Le16(d, i) | (U8(d, i + 2) << 16); }
uint32_t Be32(std::span<const std::byte> d, size_t i) {
  return (Be16(d, i) << 16) | Be16(d, i + 2);
}
uint32_t Le32(std::span<const std::byte> d, size_t i) {
  return Le16(d, i) | (Le16(d, i + 2) << 16);
}

bool HasPrefix(std::span<const std::byte> d, size_t at, std::string_view prefix) {
  return d.size() >= at + prefix.size() &&
         std::memcmp(d.data() + at, prefix.data(), prefix.size()) == 0;
}

Status Truncated(std::string_view format, std::string_view what) {
  return DataLossError("truncated " + std::string(format) + " header (" + std::string(what) + ")");
}

constexpr int kMaxDimension = (1 << 30);

Status CheckSize(std::string_view format, int64_t w, int64_t h) {
  if (w <= 0 || h <= 0 || w > kMaxDimension || h > kMaxDimension) {
    return DataLossError("invalid " + std::string(format) + " dimensions " + std::to_string(w) +
                         "x" + std::to_string(h));
  }
  return Status::OK();
}

// ---- JPEG -----------------------------------------------------------------------------------

// The EXIF orientation tag (0x0112) from an APP1 "Exif\0\0" payload; 1 when absent or
// malformed (a broken EXIF block must not make a decodable image unusable).
int ExifOrientation(std::span<const std::byte> app1) {
  if (!HasPrefix(app1, 0, std::string_view("Exif\0\0", 6))) return 1;
  std::span<const std::byte> tiff = app1.subspan(6);
  if (tiff.size() < 8) return 1;
  bool little;
  if (HasPrefix(tiff, 0, "II")) {
    little = true;
  } else if (HasPrefix(tiff, 0, "MM")) {
    little = false;
  } else {
    return 1;
  }
  auto u16 = [&](size_t i) { return little ? Le16(tiff, i) : Be16(tiff, i); };
  auto u32 = [&](size_t i) { return little ? Le32(tiff, i) : Be32(tiff, i); };
  if (u16(2) != 42) return 1;
  uint64_t ifd = u32(4);
  if (ifd + 2 > tiff.size()) return 1;
  uint32_t count = u16(ifd);
  for (uint32_t e = 0; e < count; ++e) {
    uint64_t at = ifd + 2 + uint64_t{12} * e;
    if (at + 12 > tiff.size()) return 1;
    if (u16(at) != 0x0112) continue;
    if (u16(at + 2) != 3 /*SHORT*/) return 1;
    uint32_t value = u16(at + 8);
    return value >= 1 && value <= 8 ? static_cast<int>(value) : 1;
  }
  return 1;
}

bool IsSof(uint8_t m) { return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC; }

// Skips entropy-coded data starting at `pos`; returns the position of the next marker's 0xFF,
// or data.size() when the data ends first.
size_t SkipEntropyData(std::span<const std::byte> d, size_t pos) {
  const auto* base = reinterpret_cast<const uint8_t*>(d.data());
  while (pos < d.size()) {
    const void* ff = std::memchr(base + pos, 0xFF, d.size() - pos);
    if (ff == nullptr) return d.size();
    size_t at = static_cast<const uint8_t*>(ff) - base;
    if (at + 1 >= d.size()) return d.size();
    uint8_t next = base[at + 1];
    if (next == 0x00 || (next >= 0xD0 && next <= 0xD7) || next == 0xFF) {
      pos = at + 1 + (next == 0xFF ? 0 : 1);  // stuffed zero, restart marker, fill byte
      continue;
    }
    return at;
  }
  return d.size();
}

// The least number of bits a Huffman-coded scan with this SOS payload can take: one per block
// of each component in a scan that holds DC coefficients (Ss = 0; a DC difference or
// refinement bit is at least one bit per block, and a sequential scan adds an AC code or EOB).
// AC-only progressive scans can skip whole bands with one end-of-band run: no lower bound.
// Blocks are counted as in a non-interleaved scan, the fewest the frame can have.
uint64_t ScanMinimumBits(std::span<const std::byte> sos, const ImageInfo& info,
                         const uint8_t* component_ids, const int* h_samp, const int* v_samp) {
  if (sos.empty()) return 0;
  const size_t count = U8(sos, 0);
  if (sos.size() < 1 + 2 * count + 3) return 0;
  if (U8(sos, 1 + 2 * count) != 0) return 0;  // Ss > 0: AC only
  int h_max = 1, v_max = 1;
  for (int c = 0; c < info.channels && c < 4; ++c) {
    h_max = std::max(h_max, h_samp[c]);
    v_max = std::max(v_max, v_samp[c]);
  }
  uint64_t bits = 0;
  for (size_t i = 0; i < count; ++i) {
    const uint8_t id = U8(sos, 1 + 2 * i);
    for (int c = 0; c < info.channels && c < 4; ++c) {
      if (component_ids[c] != id) continue;
      const uint64_t w = (uint64_t(info.width) * h_samp[c] + h_max - 1) / h_max;
      const uint64_t h = (uint64_t(info.height) * v_samp[c] + v_max - 1) / v_max;
      bits += ((w + 7) / 8) * ((h + 7) / 8);
      break;
    }
  }
  return bits;
}

Result<ImageInfo> ProbeJpeg(std::span<const std::byte> d, const ProbeOptions& options) {
  ImageInfo info;
  info.format = ImageFormat::kJpeg;
  bool saw_sof = false, saw_jfif = false, saw_adobe = false;
  int adobe_transform = -1;
  uint8_t component_ids[4] = {0, 0, 0, 0};
  int h_samp[4] = {0, 0, 0, 0}, v_samp[4] = {0, 0, 0, 0};
  bool arithmetic = false;
  // With check_structure: the least number of entropy-coded bits the scans need, and the bytes
  // they have.
  uint64_t needed_bits = 0, entropy_bytes = 0;
  size_t pos = 2;
  while (true) {
    if (pos >= d.size()) {
      if (!saw_sof) return Truncated("JPEG", "no frame header before the end of the data");
      return DataLossError("truncated JPEG: no end-of-image marker (file cut short?)");
    }
    if (U8(d, pos) != 0xFF) {
      return DataLossError("malformed JPEG: expected a marker at byte " + std::to_string(pos));
    }
    while (pos < d.size() && U8(d, pos) == 0xFF) ++pos;  // fill bytes
    if (pos >= d.size()) continue;
    const uint8_t marker = U8(d, pos++);
    if (marker == 0xD9) {  // EOI
      if (!saw_sof) return DataLossError("malformed JPEG: end of image before a frame header");
      if (options.check_structure) {
        if (info.scans == 0) {
          return DataLossError(
              "malformed JPEG: no scan (no entropy-coded data) before the end "
              "of image at byte " +
              std::to_string(pos - 2));
        }
        if (!arithmetic && entropy_bytes * 8 < needed_bits) {
          return DataLossError(
              "truncated JPEG: the header promises " + std::to_string(info.width) + "x" +
              std::to_string(info.height) + " pixels, whose scans need at least " +
              std::to_string((needed_bits + 7) / 8) + " bytes of entropy-coded data, but " +
              "there are " + std::to_string(entropy_bytes) +
              " (a lying header or a scan cut short)");
        }
      }
      break;
    }
    if ((marker >= 0xD0 && marker <= 0xD7) || marker == 0x01) continue;  // no length
    if (marker == 0xD8 || marker == 0x00) {
      return DataLossError(
          "malformed JPEG: unexpected marker 0x" + std::string(1, "0123456789ABCDEF"[marker >> 4]) +
          std::string(1, "0123456789ABCDEF"[marker & 15]) + " at byte " + std::to_string(pos - 1));
    }
    if (pos + 2 > d.size()) return Truncated("JPEG", "segment length");
    const uint32_t length = Be16(d, pos);
    if (length < 2)
      return DataLossError("malformed JPEG: segment length < 2 at byte " + std::to_string(pos));
    if (pos + length > d.size()) {
      if (!saw_sof) return Truncated("JPEG", "segment runs past the end");
      return DataLossError("truncated JPEG: segment at byte " + std::to_string(pos) +
                           " runs past the end");
    }
    std::span<const std::byte> payload = d.subspan(pos + 2, length - 2);
    const size_t next = pos + length;
    if (marker == 0xE0 && HasPrefix(payload, 0, std::string_view("JFIF\0", 5))) {
      saw_jfif = true;
    } else if (marker == 0xE1) {
      if (info.orientation == 1) info.orientation = ExifOrientation(payload);
    } else if (marker == 0xEE && HasPrefix(payload, 0, "Adobe") && payload.size() >= 12) {
      saw_adobe = true;
      adobe_transform = U8(payload, 11);
    } else if (IsSof(marker) && !saw_sof) {
      if (payload.size() < 6) return Truncated("JPEG", "frame header");
      const int precision = U8(payload, 0);
      const int height = static_cast<int>(Be16(payload, 1));
      const int width = static_cast<int>(Be16(payload, 3));
      const int components = U8(payload, 5);
      if (payload.size() < 6 + 3 * static_cast<size_t>(components)) {
        return Truncated("JPEG", "frame header components");
      }
      if (components != 1 && components != 3 && components != 4) {
        return UnimplementedError("JPEG with " + std::to_string(components) + " components");
      }
      if (marker == 0xC3 || marker == 0xC7 || marker == 0xCB || marker == 0xCF) {
        return UnimplementedError("lossless JPEG");
      }
      if (marker == 0xC5 || marker == 0xC6 || marker == 0xC7 || marker >= 0xCD) {
        return UnimplementedError("hierarchical JPEG");
      }
      if (precision != 8) {
        return UnimplementedError(std::to_string(precision) + "-bit JPEG");
      }
      if (height == 0) return UnimplementedError("JPEG whose height is set by a DNL marker");
      RF_RETURN_IF_ERROR(CheckSize("JPEG", width, height));
      for (int c = 0; c < components; ++c) {
        component_ids[c] = U8(payload, 6 + 3 * c);
        const uint8_t hv = U8(payload, 7 + 3 * c);
        h_samp[c] = hv >> 4;
        v_samp[c] = hv & 15;
        if (h_samp[c] < 1 || h_samp[c] > 4 || v_samp[c] < 1 || v_samp[c] > 4) {
          return DataLossError("malformed JPEG: bad sampling factors in the frame header");
        }
      }
      info.width = width;
      info.height = height;
      info.channels = components;
      info.progressive = marker == 0xC2 || marker == 0xCA;
      arithmetic = marker >= 0xC9;
      saw_sof = true;
    } else if (marker == 0xDA) {  // SOS: entropy-coded data follows
      if (!saw_sof) return DataLossError("malformed JPEG: scan before the frame header");
      if (!options.check_structure) break;
      ++info.scans;
      needed_bits += ScanMinimumBits(payload, info, component_ids, h_samp, v_samp);
      pos = SkipEntropyData(d, next);
      entropy_bytes += pos - next;
      continue;
    }
    pos = next;
  }
  if (info.channels == 1) {
    info.colorspace = ColorSpace::kGray;
  } else if (info.channels == 3) {
    // libjpeg's rules (jdapimin.c default_decompress_parms).
    if (saw_jfif) {
      info.colorspace = ColorSpace::kYCbCr;
    } else if (saw_adobe) {
      info.colorspace = adobe_transform == 0 ? ColorSpace::kRGB : ColorSpace::kYCbCr;
    } else if (component_ids[0] == 'R' && component_ids[1] == 'G' && component_ids[2] == 'B') {
      info.colorspace = ColorSpace::kRGB;
    } else {
      info.colorspace = ColorSpace::kYCbCr;
    }
    if (h_samp[1] == h_samp[2] && v_samp[1] == v_samp[2] && h_samp[0] % h_samp[1] == 0 &&
        v_samp[0] % v_samp[1] == 0) {
      info.chroma_h = h_samp[0] / h_samp[1];
      info.chroma_v = v_samp[0] / v_samp[1];
    }
  } else {
    info.colorspace = saw_adobe && adobe_transform == 2 ? ColorSpace::kYCCK : ColorSpace::kCMYK;
  }
  return info;
}

// ---- PNG, GIF, BMP, WebP ----------------------------------------------------------------------

Result<ImageInfo> ProbePng(std::span<const std::byte> d) {
  if (d.size() < 8 + 8 + 13) return Truncated("PNG", "IHDR");
  if (!HasPrefix(d, 12, "IHDR")) return DataLossError("malformed PNG: first chunk is not IHDR");
  ImageInfo info;
  info.format = ImageFormat::kPng;
  const uint32_t w = Be32(d, 16), h = Be32(d, 20);
  RF_RETURN_IF_ERROR(CheckSize("PNG", w, h));
  info.width = static_cast<int>(w);
  info.height = static_cast<int>(h);
  // What each IHDR color type decodes to, by type: gray, -, RGB, palette (RGB), gray + alpha, -,
  // RGBA; 0 channels for the types PNG does not define.
  static constexpr struct {
    int channels;
    ColorSpace colorspace;
  } kColorTypes[] = {{1, ColorSpace::kGray}, {0, ColorSpace::kUnknown},   {3, ColorSpace::kRGB},
                     {3, ColorSpace::kRGB},  {2, ColorSpace::kGrayAlpha}, {0, ColorSpace::kUnknown},
                     {4, ColorSpace::kRGBA}};
  const uint8_t color_type = U8(d, 25);
  if (color_type >= std::size(kColorTypes) || kColorTypes[color_type].channels == 0) {
    return DataLossError("malformed PNG: bad color type " + std::to_string(color_type));
  }
  info.channels = kColorTypes[color_type].channels;
  info.colorspace = kColorTypes[color_type].colorspace;
  return info;
}

// The bytes the IDAT stream of a width x height PNG inflates to: a filter byte and the packed
// samples of every row (of every pass of an interlaced image).
uint64_t PngImageDataSize(uint64_t w, uint64_t h, int bits_per_pixel, bool interlaced) {
  auto rows = [&](uint64_t pw, uint64_t ph) {
    if (pw == 0 || ph == 0) return uint64_t{0};
    return ph * ((pw * bits_per_pixel + 7) / 8 + 1);
  };
  if (!interlaced) return rows(w, h);
  static constexpr int kPass[7][4] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                                      {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};
  uint64_t total = 0;
  for (const auto& p : kPass) {
    const uint64_t pw = w > uint64_t(p[0]) ? (w - p[0] + p[2] - 1) / p[2] : 0;
    const uint64_t ph = h > uint64_t(p[1]) ? (h - p[1] + p[3] - 1) / p[3] : 0;
    total += rows(pw, ph);
  }
  return total;
}

// Walks every chunk (length, type, CRC, order) and inflates the IDAT stream without keeping it.
Status CheckPngStructure(std::span<const std::byte> d, const ImageInfo& info,
                         const ProbeOptions& options) {
  const int color_type = U8(d, 25);
  const int depth = U8(d, 24);
  const bool interlaced = U8(d, 28) == 1;
  static constexpr int kSamples[7] = {1, 0, 3, 1, 2, 0, 4};
  if (depth != 1 && depth != 2 && depth != 4 && depth != 8 && depth != 16) {
    return DataLossError("malformed PNG: bit depth " + std::to_string(depth));
  }
  const int bits_per_pixel = kSamples[color_type] * depth;
  bool saw_plte = false, saw_idat = false, idat_ended = false, saw_iend = false;
  z_stream z{};
  if (inflateInit(&z) != Z_OK) return InternalError("zlib inflateInit failed");
  struct Ender {
    z_stream* z;
    ~Ender() { inflateEnd(z); }
  } ender{&z};
  const bool inflate_idat = info.pixels() <= options.max_pixels;
  const uint64_t expected =
      PngImageDataSize(uint64_t(info.width), uint64_t(info.height), bits_per_pixel, interlaced);
  uint64_t inflated = 0;
  bool stream_end = false;
  std::vector<unsigned char> scratch(inflate_idat ? 1 << 16 : 0);
  size_t pos = 8;
  for (int index = 0; pos < d.size() && !saw_iend; ++index) {
    if (d.size() - pos < 12) {
      return DataLossError("truncated PNG: chunk header at byte " + std::to_string(pos) +
                           " runs past the end");
    }
    const uint32_t length = Be32(d, pos);
    std::string type(reinterpret_cast<const char*>(d.data()) + pos + 4, 4);
    if (length > 0x7FFFFFFFu) {
      return DataLossError("malformed PNG: chunk length " + std::to_string(length) + " at byte " +
                           std::to_string(pos));
    }
    for (char c : type) {
      if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'))) {
        return DataLossError("malformed PNG: bad chunk type at byte " + std::to_string(pos));
      }
    }
    if (d.size() - pos - 12 < length) {
      return DataLossError("truncated PNG: " + type + " chunk at byte " + std::to_string(pos) +
                           " runs past the end (" + std::to_string(length) + " bytes of data)");
    }
    const auto* body = reinterpret_cast<const Bytef*>(d.data()) + pos + 4;
    const uint32_t crc = static_cast<uint32_t>(crc32(0, body, 4 + length));
    if (crc != Be32(d, pos + 8 + length)) {
      return DataLossError("corrupt PNG: CRC mismatch in the " + type + " chunk at byte " +
                           std::to_string(pos));
    }
    if (index == 0 && type != "IHDR") return DataLossError("malformed PNG: no IHDR first");
    if (type == "PLTE") saw_plte = true;
    if (type == "IDAT") {
      if (idat_ended) {
        return DataLossError("malformed PNG: IDAT chunks not contiguous (byte " +
                             std::to_string(pos) + ")");
      }
      saw_idat = true;
      if (inflate_idat && !stream_end) {
        z.next_in = const_cast<Bytef*>(body + 4);
        z.avail_in = length;
        while (z.avail_in > 0 && !stream_end && inflated <= expected) {
          z.next_out = scratch.data();
          z.avail_out = static_cast<uInt>(scratch.size());
          const int rc = inflate(&z, Z_NO_FLUSH);
          inflated += scratch.size() - z.avail_out;
          if (rc == Z_STREAM_END) {
            stream_end = true;
          } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
            return DataLossError("corrupt PNG: image data (zlib: " +
                                 std::string(z.msg != nullptr ? z.msg : "error") +
                                 ") in the IDAT chunk at byte " + std::to_string(pos));
          } else if (rc == Z_BUF_ERROR && z.avail_out != 0) {
            break;  // needs the next chunk's input
          }
        }
      }
    } else if (saw_idat) {
      idat_ended = true;
    }
    if (type == "IEND") saw_iend = true;
    pos += 12 + length;
  }
  if (!saw_iend) return DataLossError("truncated PNG: no IEND chunk (file cut short?)");
  if (!saw_idat) return DataLossError("malformed PNG: no IDAT chunk");
  if (color_type == 3 && !saw_plte)
    return DataLossError("malformed PNG: palette image without PLTE");
  if (inflate_idat && inflated < expected) {
    return DataLossError("truncated PNG: the image data inflates to " + std::to_string(inflated) +
                         " bytes, the " + std::to_string(info.width) + "x" +
                         std::to_string(info.height) + " header needs " + std::to_string(expected) +
                         (stream_end ? "" : " (the zlib stream does not end)"));
  }
  return Status::OK();
}

// Walks every GIF block and sub-block up to the trailer.
Status CheckGifStructure(std::span<const std::byte> d) {
  size_t pos = 13;
  auto color_table = [&](uint8_t flags) -> Status {
    if (flags & 0x80) {
      const size_t size = size_t{3} << ((flags & 7) + 1);
      if (d.size() - pos < size) {
        return DataLossError("truncated GIF: color table at byte " + std::to_string(pos));
      }
      pos += size;
    }
    return Status::OK();
  };
  auto sub_blocks = [&]() -> Status {
    while (true) {
      if (pos >= d.size()) {
        return DataLossError("truncated GIF: data sub-block at byte " + std::to_string(pos) +
                             " runs past the end");
      }
      const size_t n = U8(d, pos++);
      if (n == 0) return Status::OK();
      if (d.size() - pos < n) {
        return DataLossError("truncated GIF: data sub-block at byte " + std::to_string(pos - 1) +
                             " runs past the end");
      }
      pos += n;
    }
  };
  RF_RETURN_IF_ERROR(color_table(U8(d, 10)));
  int images = 0;
  while (true) {
    if (pos >= d.size()) {
      return DataLossError("truncated GIF: no trailer (file cut short?) after " +
                           std::to_string(images) + " image(s)");
    }
    const uint8_t kind = U8(d, pos++);
    if (kind == 0x3B) break;
    if (kind == 0x21) {
      if (pos >= d.size()) return DataLossError("truncated GIF: extension label");
      ++pos;
      RF_RETURN_IF_ERROR(sub_blocks());
    } else if (kind == 0x2C) {
      if (d.size() - pos < 9) return DataLossError("truncated GIF: image descriptor");
      const uint8_t flags = U8(d, pos + 8);
      pos += 9;
      RF_RETURN_IF_ERROR(color_table(flags));
      if (pos >= d.size()) return DataLossError("truncated GIF: LZW code size");
      const int code_size = U8(d, pos++);
      if (code_size < 2 || code_size > 11) {
        return DataLossError("malformed GIF: LZW code size " + std::to_string(code_size));
      }
      RF_RETURN_IF_ERROR(sub_blocks());
      ++images;
    } else {
      return DataLossError(
          "malformed GIF: unknown block 0x" + std::string(1, "0123456789ABCDEF"[kind >> 4]) +
          std::string(1, "0123456789ABCDEF"[kind & 15]) + " at byte " + std::to_string(pos - 1));
    }
  }
  if (images == 0) return DataLossError("malformed GIF: no image");
  return Status::OK();
}

// The palette and the pixel data must lie inside the file.
Status CheckBmpStructure(std::span<const std::byte> d, const ImageInfo& info) {
  const uint32_t pixel_offset = Le32(d, 10);
  const uint32_t header_size = Le32(d, 14);
  int bpp;
  uint32_t compression = 0, image_size = 0;
  if (header_size == 12) {
    bpp = static_cast<int>(Le16(d, 24));
  } else {
    if (d.size() < 14 + 40) return Truncated("BMP", "info header");
    bpp = static_cast<int>(Le16(d, 28));
    compression = Le32(d, 30);
    image_size = Le32(d, 34);
  }
  if (pixel_offset > d.size()) {
    return DataLossError("truncated BMP: pixel data offset " + std::to_string(pixel_offset) +
                         " is past the end (" + std::to_string(d.size()) + " bytes)");
  }
  uint64_t need;
  if (compression == 0 || compression == 3) {
    need = (uint64_t(info.width) * bpp + 31) / 32 * 4 * uint64_t(info.height);
  } else {
    need = image_size;  // RLE / embedded: the stated size
  }
  if (d.size() - pixel_offset < need) {
    return DataLossError("truncated BMP pixel data: the " + std::to_string(info.width) + "x" +
                         std::to_string(info.height) + " header needs " + std::to_string(need) +
                         " bytes at byte " + std::to_string(pixel_offset) + ", the file has " +
                         std::to_string(d.size() - pixel_offset));
  }
  return Status::OK();
}

// GIF, BMP and WebP decode to RGB, or RGBA when the image has alpha: checks the size
// (CheckSize) and sets it with the channels and colorspace.
Status SetRgbSize(std::string_view format, int64_t w, int64_t h, bool alpha, ImageInfo* info) {
  RF_RETURN_IF_ERROR(CheckSize(format, w, h));
  info->width = static_cast<int>(w);
  info->height = static_cast<int>(h);
  info->channels = alpha ? 4 : 3;
  info->colorspace = alpha ? ColorSpace::kRGBA : ColorSpace::kRGB;
  return Status::OK();
}

Result<ImageInfo> ProbeGif(std::span<const std::byte> d) {
  if (d.size() < 13) return Truncated("GIF", "logical screen descriptor");
  ImageInfo info;
  info.format = ImageFormat::kGif;
  RF_RETURN_IF_ERROR(SetRgbSize("GIF", Le16(d, 6), Le16(d, 8), /*alpha=*/false, &info));
  return info;
}

Result<ImageInfo> ProbeBmp(std::span<const std::byte> d) {
  if (d.size() < 26) return Truncated("BMP", "info header");
  ImageInfo info;
  info.format = ImageFormat::kBmp;
  const uint32_t header_size = Le32(d, 14);
  int64_t w, h;
  int bpp;
  if (header_size == 12) {
    w = Le16(d, 18);
    h = Le16(d, 20);
    bpp = static_cast<int>(Le16(d, 24));
  } else if (header_size >= 40) {
    if (d.size() < 34) return Truncated("BMP", "info header");
    w = static_cast<int32_t>(Le32(d, 18));
    h = static_cast<int32_t>(Le32(d, 22));
    bpp = static_cast<int>(Le16(d, 28));
  } else {
    return DataLossError("malformed BMP: info header size " + std::to_string(header_size));
  }
  if (h < 0) h = -h;  // top-down rows
  RF_RETURN_IF_ERROR(SetRgbSize("BMP", w, h, /*alpha=*/false, &info));
  if (bpp != 1 && bpp != 4 && bpp != 8 && bpp != 16 && bpp != 24 && bpp != 32) {
    return DataLossError("malformed BMP: " + std::to_string(bpp) + " bits per pixel");
  }
  return info;
}

Result<ImageInfo> ProbeWebp(std::span<const std::byte> d) {
  if (d.size() < 30) return Truncated("WebP", "first chunk");
  ImageInfo info;
  info.format = ImageFormat::kWebp;
  std::span<const std::byte> p = d.subspan(20);
  bool alpha = false;
  uint32_t w, h;
  if (HasPrefix(d, 12, "VP8 ")) {
    if (U8(p, 3) != 0x9D || U8(p, 4) != 0x01 || U8(p, 5) != 0x2A) {
      return DataLossError("malformed WebP: bad VP8 start code");
    }
    w = Le16(p, 6) & 0x3FFF;
    h = Le16(p, 8) & 0x3FFF;
  } else if (HasPrefix(d, 12, "VP8L")) {
    if (U8(p, 0) != 0x2F) return DataLossError("malformed WebP: bad VP8L signature");
    const uint32_t bits = Le32(p, 1);
    w = (bits & 0x3FFF) + 1;
    h = ((bits >> 14) & 0x3FFF) + 1;
    alpha = (bits >> 28) & 1;
  } else if (HasPrefix(d, 12, "VP8X")) {
    const uint8_t flags = U8(p, 0);
    alpha = flags & 0x10;
    info.animated = flags & 0x02;
    w = Le24(p, 4) + 1;
    h = Le24(p, 7) + 1;
  } else {
    return DataLossError("malformed WebP: unknown first chunk");
  }
  RF_RETURN_IF_ERROR(SetRgbSize("WebP", w, h, alpha, &info));
  return info;
}

}  // namespace

namespace internal {

int CountJpegScans(std::span<const std::byte> d, int stop_after) {
  int scans = 0;
  size_t pos = 2;
  while (pos + 4 <= d.size() && (stop_after <= 0 || scans <= stop_after)) {
    if (U8(d, pos) != 0xFF) break;
    while (pos < d.size() && U8(d, pos) == 0xFF) ++pos;  // fill bytes
    if (pos >= d.size()) break;
    const uint8_t marker = U8(d, pos++);
    if (marker == 0xD9) break;                                           // EOI
    if ((marker >= 0xD0 && marker <= 0xD7) || marker == 0x01) continue;  // no length
    if (pos + 2 > d.size()) break;
    const size_t next = pos + Be16(d, pos);
    if (next > d.size()) break;
    if (marker == 0xDA) {
      ++scans;
      pos = SkipEntropyData(d, next);
    } else {
      pos = next;
    }
  }
  return scans;
}

}  // namespace internal

namespace {

constexpr EnumName<ImageFormat> kImageFormatNames[] = {
    {ImageFormat::kJpeg, "JPEG"}, {ImageFormat::kPng, "PNG"},   {ImageFormat::kGif, "GIF"},
    {ImageFormat::kBmp, "BMP"},   {ImageFormat::kWebp, "WEBP"},
};

constexpr EnumName<ColorSpace> kColorSpaceNames[] = {
    {ColorSpace::kGray, "Gray"}, {ColorSpace::kGrayAlpha, "GrayAlpha"}, {ColorSpace::kRGB, "RGB"},
    {ColorSpace::kRGBA, "RGBA"}, {ColorSpace::kYCbCr, "YCbCr"},         {ColorSpace::kCMYK, "CMYK"},
    {ColorSpace::kYCCK, "YCCK"},
};

constexpr EnumName<ChromaSubsampling> kChromaSubsamplingNames[] = {
    {ChromaSubsampling::k420, "4:2:0"},
    {ChromaSubsampling::k422, "4:2:2"},
    {ChromaSubsampling::k444, "4:4:4"},
};

}  // namespace

// kUnknown has no name.
std::string_view ImageFormatName(ImageFormat format) { return NameOf(kImageFormatNames, format); }

std::string_view ColorSpaceName(ColorSpace colorspace) {
  return NameOf(kColorSpaceNames, colorspace);
}

int ImageInfo::decoded_channels() const {
  if (colorspace == ColorSpace::kCMYK || colorspace == ColorSpace::kYCCK) return 3;
  return channels;
}

ImageFormat SniffFormat(std::span<const std::byte> d) {
  if (d.size() >= 3 && U8(d, 0) == 0xFF && U8(d, 1) == 0xD8 && U8(d, 2) == 0xFF) {
    return ImageFormat::kJpeg;
  }
  if (HasPrefix(d, 0, "\x89PNG\r\n\x1a\n")) return ImageFormat::kPng;
  if (HasPrefix(d, 0, "GIF87a") || HasPrefix(d, 0, "GIF89a")) return ImageFormat::kGif;
  if (HasPrefix(d, 0, "BM") && d.size() >= 18) return ImageFormat::kBmp;
  if (HasPrefix(d, 0, "RIFF") && HasPrefix(d, 8, "WEBP")) return ImageFormat::kWebp;
  return ImageFormat::kUnknown;
}

Result<ImageInfo> Probe(std::span<const std::byte> data, ProbeOptions options) {
  Result<ImageInfo> info = InvalidArgumentError("");
  switch (SniffFormat(data)) {
    case ImageFormat::kJpeg:
      return ProbeJpeg(data, options);
    case ImageFormat::kPng:
      info = ProbePng(data);
      if (info.ok() && options.check_structure) {
        RF_RETURN_IF_ERROR(CheckPngStructure(data, *info, options));
      }
      return info;
    case ImageFormat::kGif:
      info = ProbeGif(data);
      if (info.ok() && options.check_structure) RF_RETURN_IF_ERROR(CheckGifStructure(data));
      return info;
    case ImageFormat::kBmp:
      info = ProbeBmp(data);
      if (info.ok() && options.check_structure) {
        RF_RETURN_IF_ERROR(CheckBmpStructure(data, *info));
      }
      return info;
    case ImageFormat::kWebp:
      info = ProbeWebp(data);
      if (info.ok() && options.check_structure && uint64_t{Le32(data, 4)} + 8 > data.size()) {
        return DataLossError("truncated WebP: the RIFF header says " +
                             std::to_string(uint64_t{Le32(data, 4)} + 8) + " bytes, the file has " +
                             std::to_string(data.size()));
      }
      return info;
    case ImageFormat::kUnknown:
      break;
  }
  if (data.empty()) return InvalidArgumentError("not an image: empty file");
  return InvalidArgumentError(
      "not an image: unknown format (no JPEG, PNG, GIF, BMP or WebP "
      "signature)");
}

Result<ChromaSubsampling> ParseChromaSubsampling(std::string_view name) {
  return ParseName(kChromaSubsamplingNames, name, "chroma subsampling");
}

std::string_view ChromaSubsamplingName(ChromaSubsampling subsampling) {
  return NameOf(kChromaSubsamplingNames, subsampling, "4:2:0");
}

}  // namespace recordflow::image
