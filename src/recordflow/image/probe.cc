// Format sniffing and header probes. Every read is bounds-checked through Reader: the input
// is untrusted (see fuzz/image_probe_fuzzer.cc).
#include <algorithm>
#include <cstring>
#include <string>

#include "recordflow/image/image.h"

namespace recordflow::image {
namespace {

uint8_t U8(std::span<const std::byte> d, size_t i) { return static_cast<uint8_t>(d[i]); }
uint32_t Be16(std::span<const std::byte> d, size_t i) { return (U8(d, i) << 8) | U8(d, i + 1); }
uint32_t Le16(std::span<const std::byte> d, size_t i) { return U8(d, i) | (U8(d, i + 1) << 8); }
uint32_t Le24(std::span<const std::byte> d, size_t i) { return Le16(d, i) | (U8(d, i + 2) << 16); }
uint32_t Be32(std::span<const std::byte> d, size_t i) { return (Be16(d, i) << 16) | Be16(d, i + 2); }
uint32_t Le32(std::span<const std::byte> d, size_t i) { return Le16(d, i) | (Le16(d, i + 2) << 16); }

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

Result<ImageInfo> ProbeJpeg(std::span<const std::byte> d, const ProbeOptions& options) {
  ImageInfo info;
  info.format = ImageFormat::kJpeg;
  bool saw_sof = false, saw_jfif = false, saw_adobe = false;
  int adobe_transform = -1;
  uint8_t component_ids[4] = {0, 0, 0, 0};
  int h_samp[4] = {0, 0, 0, 0}, v_samp[4] = {0, 0, 0, 0};
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
      break;
    }
    if ((marker >= 0xD0 && marker <= 0xD7) || marker == 0x01) continue;  // no length
    if (marker == 0xD8 || marker == 0x00) {
      return DataLossError("malformed JPEG: unexpected marker 0x" +
                           std::string(1, "0123456789ABCDEF"[marker >> 4]) +
                           std::string(1, "0123456789ABCDEF"[marker & 15]) + " at byte " +
                           std::to_string(pos - 1));
    }
    if (pos + 2 > d.size()) return Truncated("JPEG", "segment length");
    const uint32_t length = Be16(d, pos);
    if (length < 2) return DataLossError("malformed JPEG: segment length < 2 at byte " +
                                         std::to_string(pos));
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
      saw_sof = true;
    } else if (marker == 0xDA) {  // SOS: entropy-coded data follows
      if (!saw_sof) return DataLossError("malformed JPEG: scan before the frame header");
      if (!options.check_structure) break;
      pos = SkipEntropyData(d, next);
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
  switch (U8(d, 25)) {
    case 0: info.channels = 1; info.colorspace = ColorSpace::kGray; break;
    case 2: info.channels = 3; info.colorspace = ColorSpace::kRGB; break;
    case 3: info.channels = 3; info.colorspace = ColorSpace::kRGB; break;  // palette
    case 4: info.channels = 2; info.colorspace = ColorSpace::kGrayAlpha; break;
    case 6: info.channels = 4; info.colorspace = ColorSpace::kRGBA; break;
    default: return DataLossError("malformed PNG: bad color type " + std::to_string(U8(d, 25)));
  }
  return info;
}

Result<ImageInfo> ProbeGif(std::span<const std::byte> d) {
  if (d.size() < 13) return Truncated("GIF", "logical screen descriptor");
  ImageInfo info;
  info.format = ImageFormat::kGif;
  RF_RETURN_IF_ERROR(CheckSize("GIF", Le16(d, 6), Le16(d, 8)));
  info.width = static_cast<int>(Le16(d, 6));
  info.height = static_cast<int>(Le16(d, 8));
  info.channels = 3;
  info.colorspace = ColorSpace::kRGB;
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
  RF_RETURN_IF_ERROR(CheckSize("BMP", w, h));
  if (bpp != 1 && bpp != 4 && bpp != 8 && bpp != 16 && bpp != 24 && bpp != 32) {
    return DataLossError("malformed BMP: " + std::to_string(bpp) + " bits per pixel");
  }
  info.width = static_cast<int>(w);
  info.height = static_cast<int>(h);
  info.channels = 3;
  info.colorspace = ColorSpace::kRGB;
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
  RF_RETURN_IF_ERROR(CheckSize("WebP", w, h));
  info.width = static_cast<int>(w);
  info.height = static_cast<int>(h);
  info.channels = alpha ? 4 : 3;
  info.colorspace = alpha ? ColorSpace::kRGBA : ColorSpace::kRGB;
  return info;
}

}  // namespace

std::string_view ImageFormatName(ImageFormat format) {
  switch (format) {
    case ImageFormat::kJpeg: return "JPEG";
    case ImageFormat::kPng: return "PNG";
    case ImageFormat::kGif: return "GIF";
    case ImageFormat::kBmp: return "BMP";
    case ImageFormat::kWebp: return "WEBP";
    case ImageFormat::kUnknown: break;
  }
  return "";
}

std::string_view ColorSpaceName(ColorSpace colorspace) {
  switch (colorspace) {
    case ColorSpace::kGray: return "Gray";
    case ColorSpace::kGrayAlpha: return "GrayAlpha";
    case ColorSpace::kRGB: return "RGB";
    case ColorSpace::kRGBA: return "RGBA";
    case ColorSpace::kYCbCr: return "YCbCr";
    case ColorSpace::kCMYK: return "CMYK";
    case ColorSpace::kYCCK: return "YCCK";
    case ColorSpace::kUnknown: break;
  }
  return "";
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
  switch (SniffFormat(data)) {
    case ImageFormat::kJpeg: return ProbeJpeg(data, options);
    case ImageFormat::kPng: return ProbePng(data);
    case ImageFormat::kGif: return ProbeGif(data);
    case ImageFormat::kBmp: return ProbeBmp(data);
    case ImageFormat::kWebp: return ProbeWebp(data);
    case ImageFormat::kUnknown: break;
  }
  if (data.empty()) return InvalidArgumentError("not an image: empty file");
  return InvalidArgumentError("not an image: unknown format (no JPEG, PNG, GIF, BMP or WebP "
                              "signature)");
}

}  // namespace recordflow::image
