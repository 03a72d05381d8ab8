// Decoders (libjpeg-turbo, libpng, giflib, libwebp, a built-in BMP reader) and the JPEG encoder.
//
// libjpeg reports errors by longjmp. Everything a longjmp may cross is plain C state, and every
// C++ object that changes after setjmp lives on the heap behind a pointer set before it, so
// the jump never skips a destructor and never reads an indeterminate local.
//
// Over 600 lines: the four decoders and the encoder share the longjmp-safe error plumbing and
// the pixel/memory limit checks of this file; one file per codec is the planned split.
#include <algorithm>
#include <bit>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

// jpeglib.h needs FILE and size_t declared first.
#include <jerror.h>
#include <jpeglib.h>
#include <png.h>

#ifdef RF_HAVE_GIF
#include <gif_lib.h>
#endif
#ifdef RF_HAVE_WEBP
#include <webp/decode.h>
#endif

#include "image_internal.h"
#include "recordflow/image/image.h"

namespace recordflow::image {
namespace {

// ---- JPEG -----------------------------------------------------------------------------------

struct JpegErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool premature_end = false;
  int max_scans = 0;  // progressive decode: 0 = no limit
  bool too_many_scans = false;
};

// libjpeg calls the progress monitor at least once per iMCU row of every scan it absorbs, so
// a file with more scans than the limit stops at its first row past it (TurboJPEG's scan
// limit works the same way).
void JpegScanLimitMonitor(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  const auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (cinfo->is_decompressor && d->progressive_mode && err->max_scans > 0 &&
      d->input_scan_number > err->max_scans) {
    err->too_many_scans = true;
    std::snprintf(err->message, sizeof(err->message), "%s",
                  internal::TooManyScans(err->max_scans).message().c_str());
    std::longjmp(err->jump, 1);
  }
}

void JpegErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

void JpegEmitMessage(j_common_ptr cinfo, int msg_level) {
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  // A warning (level -1). "Premature end of JPEG file" means the pixels past the cut are made
  // up by the decoder: that is corrupt data, not a cosmetic problem. So is "premature end of
  // data segment", what a header claiming more pixels than the entropy-coded data holds gives.
  const bool made_up_pixels =
      cinfo->err->msg_code == JWRN_JPEG_EOF || cinfo->err->msg_code == JWRN_HIT_MARKER;
  if (msg_level < 0 && made_up_pixels && !err->premature_end) {
    err->premature_end = true;
    (*cinfo->err->format_message)(cinfo, err->message);
  }
}

struct JpegDecodeState {
  jpeg_decompress_struct cinfo;
  JpegErrorManager err;
  jpeg_progress_mgr progress;
  Image image;
  std::vector<uint8_t> cmyk_row;
  bool created = false;
  ~JpegDecodeState() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

Status DecodeJpegInto(std::span<const std::byte> data, const ImageInfo& info, int min_shorter_side,
                      int max_scans, Image* out) {
  auto state = std::make_unique<JpegDecodeState>();
  JpegDecodeState* s = state.get();
  s->cinfo.err = jpeg_std_error(&s->err.pub);
  s->err.pub.error_exit = JpegErrorExit;
  s->err.pub.emit_message = JpegEmitMessage;
  s->err.max_scans = max_scans;
  if (setjmp(s->err.jump) != 0) {
    if (s->err.too_many_scans) return ResourceExhaustedError(s->err.message);
    return DataLossError(std::string("corrupt JPEG: ") + s->err.message);
  }
  jpeg_create_decompress(&s->cinfo);
  s->created = true;
  s->progress = {};
  s->progress.progress_monitor = JpegScanLimitMonitor;
  s->cinfo.progress = &s->progress;
  jpeg_mem_src(&s->cinfo, reinterpret_cast<const unsigned char*>(data.data()),
               static_cast<unsigned long>(data.size()));
  jpeg_read_header(&s->cinfo, TRUE);
  const bool cmyk = s->cinfo.jpeg_color_space == JCS_CMYK || s->cinfo.jpeg_color_space == JCS_YCCK;
  if (cmyk) {
    s->cinfo.out_color_space = JCS_CMYK;
  } else if (s->cinfo.num_components == 1) {
    s->cinfo.out_color_space = JCS_GRAYSCALE;
  } else {
    s->cinfo.out_color_space = JCS_RGB;
  }
  s->cinfo.dct_method = JDCT_ISLOW;
  int denom = 1;
  if (min_shorter_side > 0) {
    const int shorter = std::min(info.width, info.height);
    for (int d : {8, 4, 2}) {
      if ((shorter + d - 1) / d >= min_shorter_side) {
        denom = d;
        break;
      }
    }
  }
  s->cinfo.scale_num = 1;
  s->cinfo.scale_denom = static_cast<unsigned int>(denom);
  jpeg_start_decompress(&s->cinfo);
  const int w = static_cast<int>(s->cinfo.output_width);
  const int h = static_cast<int>(s->cinfo.output_height);
  if (w != (info.width + denom - 1) / denom || h != (info.height + denom - 1) / denom) {
    jpeg_abort_decompress(&s->cinfo);
    return DataLossError("corrupt JPEG: frame size differs from the header");
  }
  s->image.width = w;
  s->image.height = h;
  s->image.channels = cmyk ? 3 : static_cast<int>(s->cinfo.output_components);
  s->image.pixels.resize(s->image.row_bytes() * h);
  if (cmyk) s->cmyk_row.resize(static_cast<size_t>(w) * 4);
  const bool inverted = s->cinfo.saw_Adobe_marker;
  while (s->cinfo.output_scanline < s->cinfo.output_height) {
    const int y = static_cast<int>(s->cinfo.output_scanline);
    JSAMPROW row = cmyk ? s->cmyk_row.data() : s->image.row(y);
    jpeg_read_scanlines(&s->cinfo, &row, 1);
    if (cmyk) {
      uint8_t* dst = s->image.row(y);
      for (int x = 0; x < w; ++x) {
        int c = s->cmyk_row[4 * x], m = s->cmyk_row[4 * x + 1], yy = s->cmyk_row[4 * x + 2],
            k = s->cmyk_row[4 * x + 3];
        // Adobe applications store CMYK inverted (0 = full ink).
        if (!inverted) c = 255 - c, m = 255 - m, yy = 255 - yy, k = 255 - k;
        dst[3 * x] = static_cast<uint8_t>((c * k + 127) / 255);
        dst[3 * x + 1] = static_cast<uint8_t>((m * k + 127) / 255);
        dst[3 * x + 2] = static_cast<uint8_t>((yy * k + 127) / 255);
      }
    }
    if (s->err.premature_end) {
      jpeg_abort_decompress(&s->cinfo);
      return DataLossError(std::string("corrupt JPEG: ") + s->err.message);
    }
  }
  jpeg_finish_decompress(&s->cinfo);
  if (s->err.premature_end) return DataLossError(std::string("corrupt JPEG: ") + s->err.message);
  *out = std::move(s->image);
  return Status::OK();
}

struct JpegEncodeState {
  jpeg_compress_struct cinfo;
  JpegErrorManager err;
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  bool created = false;
  const Image* image = nullptr;
  JpegEncodeOptions options;
  ~JpegEncodeState() {
    if (created) jpeg_destroy_compress(&cinfo);
    std::free(buffer);
  }
};

// ---- PNG ------------------------------------------------------------------------------------

// libpng's low-level API with no colour management: samples come out as stored (no gamma,
// cHRM, sRGB or iCCP conversion; the simplified png_image API would treat 16-bit samples and
// files with a gAMA chunk as linear light and convert them to sRGB). Channel conversions follow
// TensorFlow's decode_png: palette -> RGB (RGBA when it has a tRNS chunk), tRNS of gray or RGB
// images ignored, 16 -> 8 bits keeps the high byte, 8 -> 16 bits multiplies by 257.
struct PngDecodeState {
  png_structp png = nullptr;
  png_infop info = nullptr;
  std::span<const std::byte> data;
  size_t pos = 0;
  char message[256] = {};
  std::vector<uint8_t> pixels;
  std::vector<png_bytep> rows;
  ~PngDecodeState() {
    if (png != nullptr) png_destroy_read_struct(&png, info != nullptr ? &info : nullptr, nullptr);
  }
};

[[noreturn]] void PngError(png_structp png, png_const_charp message) {
  auto* s = static_cast<PngDecodeState*>(png_get_error_ptr(png));
  std::snprintf(s->message, sizeof(s->message), "%s", message);
  png_longjmp(png, 1);
}

void PngWarning(png_structp, png_const_charp) {}

void PngRead(png_structp png, png_bytep out, size_t n) {
  auto* s = static_cast<PngDecodeState*>(png_get_io_ptr(png));
  if (n > s->data.size() - s->pos) png_error(png, "file ends in the middle of the image data");
  std::memcpy(out, s->data.data() + s->pos, n);
  s->pos += n;
}

// Decodes into s->pixels (samples of `bits` 8 or 16, host byte order) and the geometry.
// Everything between setjmp and a possible longjmp lives in `s` (heap).
Status RunPngDecode(PngDecodeState* s, int desired_channels, int bits, int* width, int* height,
                    int* channels) {
  s->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, s, PngError, PngWarning);
  if (s->png == nullptr) return InternalError("png_create_read_struct failed");
  s->info = png_create_info_struct(s->png);
  if (s->info == nullptr) return InternalError("png_create_info_struct failed");
  if (setjmp(png_jmpbuf(s->png)) != 0) {
    return DataLossError(std::string("corrupt PNG: ") + s->message);
  }
  png_set_read_fn(s->png, s, PngRead);
  png_read_info(s->png, s->info);
  const int color_type = png_get_color_type(s->png, s->info);
  const int depth = png_get_bit_depth(s->png, s->info);
  int native;
  switch (color_type) {
    case PNG_COLOR_TYPE_GRAY:
      native = 1;
      break;
    case PNG_COLOR_TYPE_GRAY_ALPHA:
      native = 2;
      break;
    case PNG_COLOR_TYPE_RGB:
      native = 3;
      break;
    case PNG_COLOR_TYPE_RGB_ALPHA:
      native = 4;
      break;
    case PNG_COLOR_TYPE_PALETTE:
      native = png_get_valid(s->png, s->info, PNG_INFO_tRNS) != 0 ? 4 : 3;
      break;
    default:
      png_error(s->png, "bad color type");
  }
  if (color_type == PNG_COLOR_TYPE_PALETTE) {
    png_set_palette_to_rgb(s->png);
    if (native == 4) png_set_tRNS_to_alpha(s->png);
  }
  if (color_type == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(s->png);
  const int want = desired_channels == 0 ? native : desired_channels;
  const bool color_in = native >= 3;
  const bool alpha_in = native == 2 || native == 4;
  const bool color_out = want >= 3;
  const bool alpha_out = want == 2 || want == 4;
  if (color_in && !color_out) {
    // TensorFlow's weights (ITU-R BT.601), in libpng's 1/100000 fixed point.
    png_set_rgb_to_gray_fixed(s->png, 1, 29900, 58700);
  }
  if (!color_in && color_out) png_set_gray_to_rgb(s->png);
  if (alpha_in && !alpha_out) png_set_strip_alpha(s->png);
  if (!alpha_in && alpha_out) png_set_add_alpha(s->png, 0xFFFF, PNG_FILLER_AFTER);
  if (bits == 8 && depth == 16) png_set_strip_16(s->png);
  if (bits == 16 && depth < 16) png_set_expand_16(s->png);
  if (bits == 16 && std::endian::native == std::endian::little) png_set_swap(s->png);
  png_set_interlace_handling(s->png);
  png_read_update_info(s->png, s->info);
  const png_uint_32 w = png_get_image_width(s->png, s->info);
  const png_uint_32 h = png_get_image_height(s->png, s->info);
  const size_t row_bytes = static_cast<size_t>(w) * want * (bits / 8);
  if (png_get_rowbytes(s->png, s->info) != row_bytes || png_get_channels(s->png, s->info) != want) {
    png_error(s->png, "unexpected row layout after the transforms");
  }
  s->pixels.resize(row_bytes * h);
  s->rows.resize(h);
  for (png_uint_32 y = 0; y < h; ++y) s->rows[y] = s->pixels.data() + row_bytes * y;
  png_read_image(s->png, s->rows.data());
  *width = static_cast<int>(w);
  *height = static_cast<int>(h);
  *channels = want;
  return Status::OK();
}

// desired_channels: 0 (as stored, TF's channels=0), 1, 2, 3 or 4.
Status DecodePngInto(std::span<const std::byte> data, int desired_channels, Image* out) {
  auto state = std::make_unique<PngDecodeState>();
  state->data = data;
  Image image;
  RF_RETURN_IF_ERROR(
      RunPngDecode(state.get(), desired_channels, 8, &image.width, &image.height, &image.channels));
  image.pixels = std::move(state->pixels);
  *out = std::move(image);
  return Status::OK();
}

Status DecodePng16Into(std::span<const std::byte> data, int desired_channels, Image16* out) {
  auto state = std::make_unique<PngDecodeState>();
  state->data = data;
  Image16 image;
  RF_RETURN_IF_ERROR(RunPngDecode(state.get(), desired_channels, 16, &image.width, &image.height,
                                  &image.channels));
  image.pixels.resize(state->pixels.size() / 2);
  std::memcpy(image.pixels.data(), state->pixels.data(), image.pixels.size() * 2);
  *out = std::move(image);
  return Status::OK();
}

// ---- BMP ------------------------------------------------------------------------------------

Status DecodeBmpInto(std::span<const std::byte> d, Image* out) {
  auto u8 = [&](size_t i) { return static_cast<uint32_t>(d[i]); };
  auto le16 = [&](size_t i) { return u8(i) | (u8(i + 1) << 8); };
  auto le32 = [&](size_t i) { return le16(i) | (le16(i + 2) << 16); };
  const uint32_t pixel_offset = le32(10);
  const uint32_t header_size = le32(14);
  int64_t w, h;
  int bpp;
  uint32_t compression = 0, colors_used = 0;
  size_t palette_entry = 4;
  if (header_size == 12) {
    w = le16(18);
    h = le16(20);
    bpp = static_cast<int>(le16(24));
    palette_entry = 3;
  } else {
    if (d.size() < 14 + 40) return DataLossError("truncated BMP header");
    w = static_cast<int32_t>(le32(18));
    h = static_cast<int32_t>(le32(22));
    bpp = static_cast<int>(le16(28));
    compression = le32(30);
    colors_used = le32(46);
  }
  const bool top_down = h < 0;
  if (top_down) h = -h;
  uint32_t masks[3] = {0x00FF0000, 0x0000FF00, 0x000000FF};
  if (bpp == 16) masks[0] = 0x7C00, masks[1] = 0x03E0, masks[2] = 0x001F;
  if (compression == 3 /*BI_BITFIELDS*/ && (bpp == 16 || bpp == 32)) {
    const size_t at = header_size >= 52 ? 14 + 40 : 14 + header_size;
    if (d.size() < at + 12) return DataLossError("truncated BMP bit masks");
    for (int i = 0; i < 3; ++i) masks[i] = le32(at + 4 * i);
  } else if (compression != 0) {
    return UnimplementedError("compressed BMP (compression " + std::to_string(compression) + ")");
  }
  std::vector<uint8_t> palette;  // RGB triples
  if (bpp <= 8) {
    const size_t count = colors_used != 0 ? std::min<uint32_t>(colors_used, 1u << bpp) : 1u << bpp;
    const size_t at = 14 + header_size;
    if (d.size() < at + count * palette_entry) return DataLossError("truncated BMP palette");
    palette.resize(256 * 3, 0);
    for (size_t i = 0; i < count; ++i) {
      palette[3 * i] = static_cast<uint8_t>(u8(at + palette_entry * i + 2));
      palette[3 * i + 1] = static_cast<uint8_t>(u8(at + palette_entry * i + 1));
      palette[3 * i + 2] = static_cast<uint8_t>(u8(at + palette_entry * i));
    }
  }
  const size_t stride = ((static_cast<size_t>(w) * bpp + 31) / 32) * 4;
  if (pixel_offset > d.size() || (d.size() - pixel_offset) / stride < static_cast<size_t>(h)) {
    return DataLossError("truncated BMP pixel data");
  }
  auto channel = [](uint32_t v, uint32_t mask) -> uint8_t {
    if (mask == 0) return 0;
    int shift = 0;
    while (((mask >> shift) & 1) == 0) ++shift;
    uint32_t max = mask >> shift;
    return static_cast<uint8_t>((((v & mask) >> shift) * 255 + max / 2) / max);
  };
  Image image;
  image.width = static_cast<int>(w);
  image.height = static_cast<int>(h);
  image.channels = 3;
  image.pixels.resize(image.row_bytes() * h);
  for (int64_t y = 0; y < h; ++y) {
    const size_t src = pixel_offset + stride * static_cast<size_t>(top_down ? y : h - 1 - y);
    uint8_t* dst = image.row(static_cast<int>(y));
    for (int64_t x = 0; x < w; ++x) {
      uint8_t* px = dst + 3 * x;
      if (bpp <= 8) {
        const size_t bit = static_cast<size_t>(x) * bpp;
        const uint32_t byte = u8(src + bit / 8);
        const uint32_t index = (byte >> (8 - bpp - bit % 8)) & ((1u << bpp) - 1);
        std::memcpy(px, &palette[3 * index], 3);
      } else if (bpp == 24) {
        px[0] = static_cast<uint8_t>(u8(src + 3 * x + 2));
        px[1] = static_cast<uint8_t>(u8(src + 3 * x + 1));
        px[2] = static_cast<uint8_t>(u8(src + 3 * x));
      } else {
        const uint32_t v = bpp == 16 ? le16(src + 2 * x) : le32(src + 4 * x);
        for (int c = 0; c < 3; ++c) px[c] = channel(v, masks[c]);
      }
    }
  }
  *out = std::move(image);
  return Status::OK();
}

// ---- GIF ------------------------------------------------------------------------------------

#ifdef RF_HAVE_GIF
struct GifSource {
  std::span<const std::byte> data;
  size_t pos = 0;
};

int GifRead(GifFileType* gif, GifByteType* buf, int n) {
  auto* src = static_cast<GifSource*>(gif->UserData);
  const size_t count = std::min<size_t>(static_cast<size_t>(n), src->data.size() - src->pos);
  std::memcpy(buf, src->data.data() + src->pos, count);
  src->pos += count;
  return static_cast<int>(count);
}

// GifErrorString returns NULL for codes it does not know (found by image_decode_fuzzer).
const char* GifMessage(int code) {
  const char* m = GifErrorString(code);
  return m != nullptr ? m : "unknown GIF error";
}

struct GifCloser {
  void operator()(GifFileType* gif) const {
    int error;
    DGifCloseFile(gif, &error);
  }
};

Status DecodeGifInto(std::span<const std::byte> data, uint64_t max_pixels, Image* out) {
  GifSource source{data, 0};
  int error = 0;
  std::unique_ptr<GifFileType, GifCloser> gif(DGifOpen(&source, GifRead, &error));
  if (!gif) return DataLossError(std::string("corrupt GIF: ") + GifMessage(error));
  Image image;
  image.width = gif->SWidth;
  image.height = gif->SHeight;
  image.channels = 3;
  image.pixels.assign(image.row_bytes() * image.height, 0);
  int transparent = -1;
  while (true) {
    GifRecordType type;
    if (DGifGetRecordType(gif.get(), &type) == GIF_ERROR) {
      return DataLossError(std::string("corrupt GIF: ") + GifMessage(gif->Error));
    }
    if (type == TERMINATE_RECORD_TYPE) return DataLossError("corrupt GIF: no image");
    if (type == EXTENSION_RECORD_TYPE) {
      int code;
      GifByteType* ext;
      if (DGifGetExtension(gif.get(), &code, &ext) == GIF_ERROR) {
        return DataLossError(std::string("corrupt GIF: ") + GifMessage(gif->Error));
      }
      while (ext != nullptr) {
        if (code == GRAPHICS_EXT_FUNC_CODE && ext[0] >= 4 && (ext[1] & 1)) transparent = ext[4];
        if (DGifGetExtensionNext(gif.get(), &ext) == GIF_ERROR) {
          return DataLossError(std::string("corrupt GIF: ") + GifMessage(gif->Error));
        }
        code = -1;
      }
      continue;
    }
    if (type != IMAGE_DESC_RECORD_TYPE) continue;
    if (DGifGetImageDesc(gif.get()) == GIF_ERROR) {
      return DataLossError(std::string("corrupt GIF: ") + GifMessage(gif->Error));
    }
    const GifImageDesc& desc = gif->Image;
    ColorMapObject* map = desc.ColorMap != nullptr ? desc.ColorMap : gif->SColorMap;
    if (map == nullptr) return DataLossError("corrupt GIF: no color map");
    if (gif->SColorMap != nullptr && gif->SBackGroundColor < gif->SColorMap->ColorCount) {
      const GifColorType bg = gif->SColorMap->Colors[gif->SBackGroundColor];
      for (size_t i = 0; i < image.pixels.size(); i += 3) {
        image.pixels[i] = bg.Red, image.pixels[i + 1] = bg.Green, image.pixels[i + 2] = bg.Blue;
      }
    }
    if (desc.Width <= 0 || desc.Height <= 0 || desc.Width > 65535 || desc.Height > 65535) {
      return DataLossError("corrupt GIF: bad frame size");
    }
    // The logical screen passed the max_pixels check; the frame, which costs the LZW work,
    // has its own size. Only the screen's pixels are kept, so a frame far larger than the
    // screen is work for nothing.
    const uint64_t frame_pixels = uint64_t(desc.Width) * uint64_t(desc.Height);
    const std::string frame = "GIF frame of " + std::to_string(desc.Width) + "x" +
                              std::to_string(desc.Height) + " pixels at (" +
                              std::to_string(desc.Left) + ", " + std::to_string(desc.Top) + ")";
    if (frame_pixels > max_pixels) {
      return ResourceExhaustedError(frame + " is over the limit of " + std::to_string(max_pixels) +
                                    " pixels");
    }
    const uint64_t screen_pixels = uint64_t(image.width) * uint64_t(image.height);
    if (frame_pixels > std::max(screen_pixels, kMaxGifFrameSlack)) {
      return ResourceExhaustedError(frame + " is larger than its " + std::to_string(image.width) +
                                    "x" + std::to_string(image.height) + " logical screen");
    }
    std::vector<GifPixelType> line(static_cast<size_t>(desc.Width));
    std::vector<int> rows;
    if (desc.Interlace) {
      for (int pass = 0; pass < 4; ++pass) {
        static constexpr int kStart[4] = {0, 4, 2, 1}, kStep[4] = {8, 8, 4, 2};
        for (int y = kStart[pass]; y < desc.Height; y += kStep[pass]) rows.push_back(y);
      }
    } else {
      for (int y = 0; y < desc.Height; ++y) rows.push_back(y);
    }
    for (int y : rows) {
      if (DGifGetLine(gif.get(), line.data(), desc.Width) == GIF_ERROR) {
        return DataLossError(std::string("corrupt GIF: ") + GifMessage(gif->Error));
      }
      const int dy = desc.Top + y;
      if (dy < 0 || dy >= image.height) continue;
      for (int x = 0; x < desc.Width; ++x) {
        const int dx = desc.Left + x;
        if (dx < 0 || dx >= image.width || line[x] == transparent) continue;
        if (line[x] >= map->ColorCount) continue;
        const GifColorType c = map->Colors[line[x]];
        uint8_t* px = image.row(dy) + 3 * dx;
        px[0] = c.Red, px[1] = c.Green, px[2] = c.Blue;
      }
    }
    break;  // first frame only
  }
  *out = std::move(image);
  return Status::OK();
}
#endif

#ifdef RF_HAVE_WEBP
Status DecodeWebpInto(std::span<const std::byte> data, const ImageInfo& info, Image* out) {
  if (info.animated) return UnimplementedError("animated WebP");
  Image image;
  image.width = info.width;
  image.height = info.height;
  image.channels = info.channels == 4 ? 4 : 3;
  image.pixels.resize(image.row_bytes() * image.height);
  const auto* src = reinterpret_cast<const uint8_t*>(data.data());
  const uint8_t* ok =
      image.channels == 4
          ? WebPDecodeRGBAInto(src, data.size(), image.pixels.data(), image.pixels.size(),
                               static_cast<int>(image.row_bytes()))
          : WebPDecodeRGBInto(src, data.size(), image.pixels.data(), image.pixels.size(),
                              static_cast<int>(image.row_bytes()));
  if (ok == nullptr) return DataLossError("corrupt WebP data");
  *out = std::move(image);
  return Status::OK();
}
#endif

// Everything between setjmp and a possible longjmp reads only through `s` (heap state set
// before setjmp), so no local can be clobbered.
Status CompressJpeg(JpegEncodeState* s) {
  s->cinfo.err = jpeg_std_error(&s->err.pub);
  s->err.pub.error_exit = JpegErrorExit;
  if (setjmp(s->err.jump) != 0) {
    return InternalError(std::string("JPEG encoder: ") + s->err.message);
  }
  jpeg_create_compress(&s->cinfo);
  s->created = true;
  jpeg_mem_dest(&s->cinfo, &s->buffer, &s->size);
  s->cinfo.image_width = static_cast<JDIMENSION>(s->image->width);
  s->cinfo.image_height = static_cast<JDIMENSION>(s->image->height);
  s->cinfo.input_components = s->image->channels;
  s->cinfo.in_color_space = s->image->channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&s->cinfo);
  jpeg_set_quality(&s->cinfo, s->options.quality, TRUE);
  s->cinfo.optimize_coding = s->options.optimize_coding ? TRUE : FALSE;
  s->cinfo.dct_method = JDCT_ISLOW;
  if (s->image->channels == 3) {
    int h = 2, v = 2;
    if (s->options.subsampling == ChromaSubsampling::k422) v = 1;
    if (s->options.subsampling == ChromaSubsampling::k444) h = 1, v = 1;
    s->cinfo.comp_info[0].h_samp_factor = h;
    s->cinfo.comp_info[0].v_samp_factor = v;
    for (int c = 1; c < 3; ++c) {
      s->cinfo.comp_info[c].h_samp_factor = 1;
      s->cinfo.comp_info[c].v_samp_factor = 1;
    }
  }
  if (s->options.progressive) jpeg_simple_progression(&s->cinfo);
  jpeg_start_compress(&s->cinfo, TRUE);
  while (s->cinfo.next_scanline < s->cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(s->image->row(static_cast<int>(s->cinfo.next_scanline)));
    jpeg_write_scanlines(&s->cinfo, &row, 1);
  }
  jpeg_finish_compress(&s->cinfo);
  return Status::OK();
}

}  // namespace

namespace internal {

Status TooManyScans(int max_scans, int scans) {
  if (scans > 0) {
    return ResourceExhaustedError("progressive JPEG has " + std::to_string(scans) +
                                  " scans: more than " + std::to_string(max_scans) +
                                  " scans (the max_scans limit), refused before decoding");
  }
  return ResourceExhaustedError("progressive JPEG has more than " + std::to_string(max_scans) +
                                " scans (the max_scans limit)");
}

}  // namespace internal

bool CanDecode(ImageFormat format) {
  switch (format) {
    case ImageFormat::kJpeg:
    case ImageFormat::kPng:
    case ImageFormat::kBmp:
      return true;
#ifdef RF_HAVE_GIF
    case ImageFormat::kGif:
      return true;
#endif
#ifdef RF_HAVE_WEBP
    case ImageFormat::kWebp:
      return true;
#endif
    default:
      return false;
  }
}

namespace {

// Decode's and Decode16's checks before any pixel is decoded: the channel count asked for, the
// header (Probe) and the pixel limit. Returns the probed header.
Result<ImageInfo> ProbeForDecode(std::span<const std::byte> data, const DecodeOptions& options) {
  if (options.desired_channels < 0 || options.desired_channels > 4 ||
      options.desired_channels == 2) {
    return InvalidArgumentError("desired_channels must be 0, 1, 3 or 4 (got " +
                                std::to_string(options.desired_channels) + ")");
  }
  RF_ASSIGN_OR_RETURN(ImageInfo info, Probe(data));
  if (info.pixels() > options.max_pixels) {
    return ResourceExhaustedError("image of " + std::to_string(info.width) + "x" +
                                  std::to_string(info.height) + " pixels is over the limit of " +
                                  std::to_string(options.max_pixels) + " pixels");
  }
  return info;
}

}  // namespace

Result<Image> Decode(std::span<const std::byte> data, DecodeOptions options) {
  RF_ASSIGN_OR_RETURN(ImageInfo info, ProbeForDecode(data, options));
  if (!CanDecode(info.format)) {
    return UnimplementedError("decoding " + std::string(ImageFormatName(info.format)) +
                              " is not built into this binary");
  }
  Image image;
  switch (info.format) {
    case ImageFormat::kJpeg:
      if (info.progressive && options.max_scans > 0) {
        const int scans = internal::CountJpegScans(data, 0);
        if (scans > options.max_scans) return internal::TooManyScans(options.max_scans, scans);
      }
      RF_RETURN_IF_ERROR(
          DecodeJpegInto(data, info, options.min_shorter_side, options.max_scans, &image));
      break;
    case ImageFormat::kPng:
      RF_RETURN_IF_ERROR(DecodePngInto(data, options.desired_channels, &image));
      break;
    case ImageFormat::kBmp:
      RF_RETURN_IF_ERROR(DecodeBmpInto(data, &image));
      break;
#ifdef RF_HAVE_GIF
    case ImageFormat::kGif:
      RF_RETURN_IF_ERROR(DecodeGifInto(data, options.max_pixels, &image));
      break;
#endif
#ifdef RF_HAVE_WEBP
    case ImageFormat::kWebp:
      RF_RETURN_IF_ERROR(DecodeWebpInto(data, info, &image));
      break;
#endif
    default:
      return InternalError("unreachable image format");
  }
  if (options.apply_orientation && info.orientation != 1) {
    image = ApplyOrientation(image, info.orientation);
  }
  if (options.desired_channels != 0 && options.desired_channels != image.channels) {
    image = internal::ConvertChannels(image, options.desired_channels);
  }
  return image;
}

Result<Image16> Decode16(std::span<const std::byte> data, DecodeOptions options) {
  Image16 out;
  if (SniffFormat(data) == ImageFormat::kPng) {
    RF_RETURN_IF_ERROR(ProbeForDecode(data, options).status());
    RF_RETURN_IF_ERROR(DecodePng16Into(data, options.desired_channels, &out));
    return out;
  }
  RF_ASSIGN_OR_RETURN(Image image, Decode(data, options));
  out.width = image.width;
  out.height = image.height;
  out.channels = image.channels;
  out.pixels.resize(image.pixels.size());
  for (size_t i = 0; i < image.pixels.size(); ++i) {
    out.pixels[i] = static_cast<uint16_t>(image.pixels[i] * 257);
  }
  return out;
}

Result<std::string> EncodeJpeg(const Image& input, JpegEncodeOptions options) {
  if (input.width <= 0 || input.height <= 0 || input.channels < 1 || input.channels > 4 ||
      input.pixels.size() != input.row_bytes() * input.height) {
    return InvalidArgumentError("EncodeJpeg: empty or inconsistent image");
  }
  if (options.quality < 1 || options.quality > 100) {
    return InvalidArgumentError("JPEG quality must be 1..100 (got " +
                                std::to_string(options.quality) + ")");
  }
  if (input.width > 65500 || input.height > 65500) {
    return InvalidArgumentError("JPEG dimensions are limited to 65500 pixels");
  }
  const Image* image = &input;
  Image stripped;
  if (input.channels == 2 || input.channels == 4) {
    stripped = internal::ConvertChannels(input, input.channels == 2 ? 1 : 3);
    image = &stripped;
  }
  auto state = std::make_unique<JpegEncodeState>();
  state->image = image;
  state->options = options;
  RF_RETURN_IF_ERROR(CompressJpeg(state.get()));
  return std::string(reinterpret_cast<const char*>(state->buffer), state->size);
}

}  // namespace recordflow::image
