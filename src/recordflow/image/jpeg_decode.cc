// ImageDecoder: JPEG decode of a crop, at a DCT scale, through libjpeg-turbo.
//
// libjpeg reports errors (and, here, warnings that are to fail the decode) by longjmp out of
// its callbacks. Everything the code between setjmp and a possible longjmp reads or writes
// lives in the heap-allocated JpegState, so no local variable is ever indeterminate after the
// jump, and no C++ object with a destructor is skipped by it.
#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>

// jpeglib.h needs FILE and size_t declared first.
#include <jerror.h>
#include <jpeglib.h>

#include "image_internal.h"
#include "recordflow/image/ops.h"

namespace recordflow::image {

struct ImageDecoder::JpegState {
  jpeg_decompress_struct cinfo;
  jpeg_error_mgr err;
  jpeg_source_mgr src;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {};
  bool created = false;
  // Per call.
  JpegWarnings policy = JpegWarnings::kError;
  int warnings = 0;
  const RegionDecodeOptions* options = nullptr;
  DecodedRegion* out = nullptr;
  std::span<const std::byte> data;
  std::vector<uint8_t> row;  // one scanline as libjpeg writes it (reused)
  std::string error;         // set before returning an error from Run
  jpeg_progress_mgr progress;
  bool too_many_scans = false;

  ~JpegState() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

namespace {

using JpegState = ImageDecoder::JpegState;

JpegState* StateOf(j_common_ptr cinfo) { return static_cast<JpegState*>(cinfo->client_data); }

[[noreturn]] void ErrorExit(j_common_ptr cinfo) {
  JpegState* s = StateOf(cinfo);
  (*cinfo->err->format_message)(cinfo, s->message);
  std::longjmp(s->jump, 1);
}

// Warnings (level -1) are corrupt data that libjpeg decodes anyway; trace messages (level >= 0)
// are ignored. A truncated file always fails: the rows past the cut would be made up.
void EmitMessage(j_common_ptr cinfo, int msg_level) {
  if (msg_level >= 0) return;
  JpegState* s = StateOf(cinfo);
  if (s->warnings++ == 0) (*cinfo->err->format_message)(cinfo, s->message);
  if (s->policy == JpegWarnings::kError || cinfo->err->msg_code == JWRN_JPEG_EOF) {
    if (s->warnings > 1) (*cinfo->err->format_message)(cinfo, s->message);
    std::longjmp(s->jump, 1);
  }
}

// Called at least once per iMCU row of every scan libjpeg absorbs: a progressive file with
// more scans than options->max_scans stops at the first row past the limit.
void ScanLimitMonitor(j_common_ptr cinfo) {
  JpegState* s = StateOf(cinfo);
  const int limit = s->options != nullptr ? s->options->max_scans : 0;
  if (limit > 0 && s->cinfo.progressive_mode && s->cinfo.input_scan_number > limit) {
    s->too_many_scans = true;
    std::snprintf(s->message, sizeof(s->message), "%s",
                  internal::TooManyScans(limit).message().c_str());
    std::longjmp(s->jump, 1);
  }
}

// Source manager over the caller's bytes: no copy, and a fake EOI (with a warning) at the end.
void InitSource(j_decompress_ptr) {}
void TermSource(j_decompress_ptr) {}

boolean FillInputBuffer(j_decompress_ptr cinfo) {
  static const JOCTET kEoi[2] = {0xFF, JPEG_EOI};
  WARNMS(cinfo, JWRN_JPEG_EOF);
  cinfo->src->next_input_byte = kEoi;
  cinfo->src->bytes_in_buffer = 2;
  return TRUE;
}

void SkipInputData(j_decompress_ptr cinfo, long num_bytes) {
  if (num_bytes <= 0) return;
  jpeg_source_mgr* src = cinfo->src;
  while (static_cast<size_t>(num_bytes) > src->bytes_in_buffer) {
    num_bytes -= static_cast<long>(src->bytes_in_buffer);
    FillInputBuffer(cinfo);
  }
  src->next_input_byte += num_bytes;
  src->bytes_in_buffer -= static_cast<size_t>(num_bytes);
}

void Begin(JpegState* s, std::span<const std::byte> data) {
  s->src.next_input_byte = reinterpret_cast<const JOCTET*>(data.data());
  s->src.bytes_in_buffer = data.size();
  s->warnings = 0;
  s->message[0] = '\0';
  s->too_many_scans = false;
}

// CMYK as libjpeg gives it (Adobe files store it inverted) -> RGB, as image::Decode does.
void CmykToRgb(const uint8_t* cmyk, int n, bool inverted, uint8_t* rgb) {
  for (int i = 0; i < n; ++i) {
    int c = cmyk[4 * i], m = cmyk[4 * i + 1], y = cmyk[4 * i + 2], k = cmyk[4 * i + 3];
    if (!inverted) c = 255 - c, m = 255 - m, y = 255 - y, k = 255 - k;
    rgb[3 * i] = static_cast<uint8_t>((c * k + 127) / 255);
    rgb[3 * i + 1] = static_cast<uint8_t>((m * k + 127) / 255);
    rgb[3 * i + 2] = static_cast<uint8_t>((y * k + 127) / 255);
  }
}

// Reads the header only. Between setjmp and return, state lives in `s`.
Status RunHeader(JpegState* s, ImageHeader* header) {
  if (setjmp(s->jump) != 0) {
    jpeg_abort_decompress(&s->cinfo);
    return DataLossError(std::string("corrupt JPEG: ") + s->message);
  }
  jpeg_read_header(&s->cinfo, TRUE);
  header->format = ImageFormat::kJpeg;
  header->width = static_cast<int>(s->cinfo.image_width);
  header->height = static_cast<int>(s->cinfo.image_height);
  jpeg_abort_decompress(&s->cinfo);
  return Status::OK();
}

Status RunRegion(JpegState* s) {
  if (setjmp(s->jump) != 0) {
    jpeg_abort_decompress(&s->cinfo);
    if (s->too_many_scans) return ResourceExhaustedError(s->message);
    if (!s->error.empty()) return InvalidArgumentError(s->error);
    return DataLossError(std::string("corrupt JPEG: ") + s->message);
  }
  jpeg_decompress_struct& ci = s->cinfo;
  const RegionDecodeOptions& o = *s->options;
  DecodedRegion& out = *s->out;
  jpeg_read_header(&ci, TRUE);
  const uint64_t pixels = uint64_t{ci.image_width} * ci.image_height;
  if (pixels > o.max_pixels) {
    jpeg_abort_decompress(&ci);
    return ResourceExhaustedError(
        "image of " + std::to_string(ci.image_width) + "x" + std::to_string(ci.image_height) +
        " pixels is over the limit of " + std::to_string(o.max_pixels) + " pixels");
  }
  // Refused before any scan is decoded (the progress monitor is the backstop).
  if (ci.progressive_mode && o.max_scans > 0) {
    const int scans = internal::CountJpegScans(s->data, 0);
    if (scans > o.max_scans) {
      jpeg_abort_decompress(&ci);
      return internal::TooManyScans(o.max_scans, scans);
    }
  }
  const int W = static_cast<int>(ci.image_width), H = static_cast<int>(ci.image_height);
  int x0 = 0, y0 = 0, x1 = W, y1 = H;
  if (o.crop.has_value()) {
    if (Status valid = CheckCropWindow(*o.crop, W, H); !valid.ok()) {
      jpeg_abort_decompress(&ci);
      return valid;
    }
    x0 = o.crop->x;
    y0 = o.crop->y;
    x1 = o.crop->x + o.crop->width;
    y1 = o.crop->y + o.crop->height;
  }
  int d = 1;
  if (o.dct_scaling && o.target_width > 0 && o.target_height > 0) {
    d = ChooseScaleDenom(x1 - x0, y1 - y0, o.target_width, o.target_height);
  }
  const bool cmyk = ci.jpeg_color_space == JCS_CMYK || ci.jpeg_color_space == JCS_YCCK;
  ci.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;  // libjpeg-turbo expands gray to RGB
  ci.dct_method = JDCT_ISLOW;
  ci.do_fancy_upsampling = o.fancy_upsampling ? TRUE : FALSE;
  ci.scale_num = 1;
  ci.scale_denom = static_cast<unsigned>(d);
  jpeg_calc_output_dimensions(&ci);
  const int OW = static_cast<int>(ci.output_width), OH = static_cast<int>(ci.output_height);
  // The crop in scaled pixels: every scaled pixel it touches.
  const int sx0 = x0 / d, sy0 = y0 / d;
  const int sx1 = std::min(OW, (x1 + d - 1) / d), sy1 = std::min(OH, (y1 + d - 1) / d);
  out.scale_denom = d;
  out.box = Box{static_cast<double>(x0) / d - sx0, static_cast<double>(y0) / d - sy0,
                static_cast<double>(x1 - x0) / d, static_cast<double>(y1 - y0) / d};
  out.box.width = std::min(out.box.width, static_cast<double>(sx1 - sx0) - out.box.x);
  out.box.height = std::min(out.box.height, static_cast<double>(sy1 - sy0) - out.box.y);
  out.format = ImageFormat::kJpeg;
  jpeg_start_decompress(&ci);
  // Decode only the iMCU columns holding the crop plus one pixel each side: the upsampler
  // treats the decoded span's edges as image edges, which must not reach the crop.
  JDIMENSION xoff = 0, span = static_cast<JDIMENSION>(OW);
  if (sx0 > 1 || sx1 < OW - 1) {
    xoff = static_cast<JDIMENSION>(std::max(0, sx0 - 1));
    span = static_cast<JDIMENSION>(std::min(OW, sx1 + 1)) - xoff;
    jpeg_crop_scanline(&ci, &xoff, &span);
  }
  const int comps = static_cast<int>(ci.output_components);
  int skip_cols = sx0 - static_cast<int>(xoff);
  Image& img = out.image;
  img.width = sx1 - sx0;
  if (o.allow_extra_columns && !cmyk) {
    // The whole decoded span: each row lands in place, and the crop starts skip_cols in.
    img.width = static_cast<int>(ci.output_width);
    out.box.x += skip_cols;
    skip_cols = 0;
  }
  img.height = sy1 - sy0;
  img.channels = 3;
  img.pixels.resize(img.row_bytes() * img.height);
  if (sy0 > 0) jpeg_skip_scanlines(&ci, static_cast<JDIMENSION>(sy0));
  const bool inverted = ci.saw_Adobe_marker;
  // Several rows per call (rec_outbuf_height: 2 for h2v2 upsampling spares libjpeg a copy);
  // straight into the image when the decoded rows are the crop's rows.
  const int batch = std::max(1, ci.rec_outbuf_height);
  const bool direct = !cmyk && skip_cols == 0 && static_cast<int>(ci.output_width) == img.width;
  const size_t stage_row = static_cast<size_t>(ci.output_width) * comps;
  if (!direct) s->row.resize(stage_row * batch);
  JSAMPROW rows[16];
  int y = 0;
  while (y < img.height) {
    const int want = std::min({batch, img.height - y, 16});
    for (int k = 0; k < want; ++k) {
      rows[k] = direct ? img.row(y + k) : s->row.data() + stage_row * k;
    }
    const int got = static_cast<int>(jpeg_read_scanlines(&ci, rows, static_cast<JDIMENSION>(want)));
    if (got <= 0) {
      jpeg_abort_decompress(&ci);
      return DataLossError("corrupt JPEG: fewer rows than the header says");
    }
    if (!direct) {
      for (int k = 0; k < got; ++k) {
        const uint8_t* src = s->row.data() + stage_row * k + static_cast<size_t>(skip_cols) * comps;
        if (cmyk) {
          CmykToRgb(src, img.width, inverted, img.row(y + k));
        } else {
          std::memcpy(img.row(y + k), src, img.row_bytes());
        }
      }
    }
    y += got;
  }
  out.warnings = s->warnings;
  // Rows below the crop are never decoded.
  jpeg_abort_decompress(&ci);
  return Status::OK();
}

void EnsureCreated(JpegState* s) {
  if (s->created) return;
  s->cinfo.err = jpeg_std_error(&s->err);
  s->err.error_exit = ErrorExit;
  s->err.emit_message = EmitMessage;
  jpeg_create_decompress(&s->cinfo);  // allocation failure would exit: not guarded by setjmp
  s->cinfo.client_data = s;
  s->src.init_source = InitSource;
  s->src.fill_input_buffer = FillInputBuffer;
  s->src.skip_input_data = SkipInputData;
  s->src.resync_to_restart = jpeg_resync_to_restart;
  s->src.term_source = TermSource;
  s->src.bytes_in_buffer = 0;
  s->src.next_input_byte = nullptr;
  s->cinfo.src = &s->src;
  s->progress = {};
  s->progress.progress_monitor = ScanLimitMonitor;
  s->cinfo.progress = &s->progress;
  s->created = true;
}

Status CheckKnown(std::span<const std::byte> data, ImageFormat format) {
  if (format == ImageFormat::kUnknown) {
    return InvalidArgumentError("not an image (unknown magic bytes, " +
                                std::to_string(data.size()) + " bytes)");
  }
  return Status::OK();
}

}  // namespace

Status CheckCropWindow(const Rect& crop, int width, int height) {
  const int64_t right = int64_t{crop.x} + crop.width, bottom = int64_t{crop.y} + crop.height;
  if (crop.width > 0 && crop.height > 0 && crop.x >= 0 && crop.y >= 0 && right <= width &&
      bottom <= height) {
    return Status::OK();
  }
  std::string why;
  if (crop.width <= 0 || crop.height <= 0) {
    why = "width and height must be > 0";
  } else if (crop.x < 0 || crop.y < 0) {
    why = "offsets must be >= 0";
  } else if (crop.x >= width || crop.y >= height) {
    why = "offset is past the image";
  } else {
    why = "window extends past the image";
  }
  return InvalidArgumentError(
      "invalid crop window x=" + std::to_string(crop.x) + " y=" + std::to_string(crop.y) +
      " width=" + std::to_string(crop.width) + " height=" + std::to_string(crop.height) +
      " for a " + std::to_string(width) + "x" + std::to_string(height) + " image: " + why);
}

int ChooseScaleDenom(int crop_w, int crop_h, int target_w, int target_h) {
  for (int d : {8, 4, 2}) {
    if (crop_w / d >= target_w && crop_h / d >= target_h) return d;
  }
  return 1;
}

ImageDecoder::ImageDecoder() : jpeg_(std::make_unique<JpegState>()) {}
ImageDecoder::~ImageDecoder() = default;

Result<ImageHeader> ImageDecoder::ReadHeader(std::span<const std::byte> data) {
  const ImageFormat format = SniffFormat(data);
  RF_RETURN_IF_ERROR(CheckKnown(data, format));
  ImageHeader header;
  if (format == ImageFormat::kJpeg) {
    EnsureCreated(jpeg_.get());
    Begin(jpeg_.get(), data);
    jpeg_->policy = JpegWarnings::kCount;  // headers: warnings surface in the decode
    RF_RETURN_IF_ERROR(RunHeader(jpeg_.get(), &header));
    return header;
  }
  RF_ASSIGN_OR_RETURN(ImageInfo info, Probe(data));
  header.format = info.format;
  header.width = info.width;
  header.height = info.height;
  return header;
}

Status ImageDecoder::DecodeRegion(std::span<const std::byte> data,
                                  const RegionDecodeOptions& options, DecodedRegion* out) {
  const ImageFormat format = SniffFormat(data);
  RF_RETURN_IF_ERROR(CheckKnown(data, format));
  if (format == ImageFormat::kJpeg) {
    JpegState* s = jpeg_.get();
    EnsureCreated(s);
    Begin(s, data);
    s->policy = options.warnings;
    s->data = data;
    s->options = &options;
    s->out = out;
    s->error.clear();
    return RunRegion(s);
  }
  // Other formats: whole decode, then crop.
  DecodeOptions decode;
  decode.desired_channels = 3;
  decode.max_pixels = options.max_pixels;
  decode.max_scans = options.max_scans;
  // The window is checked against the header before any pixel is decoded.
  if (options.crop.has_value()) {
    RF_ASSIGN_OR_RETURN(ImageInfo info, Probe(data));
    RF_RETURN_IF_ERROR(CheckCropWindow(*options.crop, info.width, info.height));
  }
  RF_ASSIGN_OR_RETURN(Image full, Decode(data, decode));
  int x0 = 0, y0 = 0, x1 = full.width, y1 = full.height;
  if (options.crop.has_value()) {
    RF_RETURN_IF_ERROR(CheckCropWindow(*options.crop, full.width, full.height));
    x0 = options.crop->x;
    y0 = options.crop->y;
    x1 = options.crop->x + options.crop->width;
    y1 = options.crop->y + options.crop->height;
  }
  out->format = format;
  out->scale_denom = 1;
  out->warnings = 0;
  out->box = Box{0, 0, static_cast<double>(x1 - x0), static_cast<double>(y1 - y0)};
  if (x0 == 0 && y0 == 0 && x1 == full.width && y1 == full.height) {
    out->image = std::move(full);
    return Status::OK();
  }
  Image& img = out->image;
  img.width = x1 - x0;
  img.height = y1 - y0;
  img.channels = 3;
  img.pixels.resize(img.row_bytes() * img.height);
  for (int y = 0; y < img.height; ++y) {
    std::memcpy(img.row(y), full.row(y0 + y) + static_cast<size_t>(x0) * 3, img.row_bytes());
  }
  return Status::OK();
}

Result<Image> DecodeImageRgb(std::span<const std::byte> data, uint64_t max_pixels, int max_scans) {
  ImageDecoder decoder;
  RegionDecodeOptions options;
  options.max_pixels = max_pixels;
  options.max_scans = max_scans;
  options.dct_scaling = false;
  DecodedRegion region;
  RF_RETURN_IF_ERROR(decoder.DecodeRegion(data, options, &region));
  return std::move(region.image);
}

}  // namespace recordflow::image
