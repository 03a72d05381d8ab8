// Encoding straight through libjpeg, for tests that need JPEGs image::EncodeJpeg does not write
// (CMYK, custom progressive scan scripts).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>

#include "recordflow/image/image.h"

namespace recordflow::image::testing_util {

// `img` (img.channels components per pixel, read as `color_space`) encoded by libjpeg with its
// defaults, after `configure` has adjusted them (quality, scan script, ...).
inline std::string LibjpegEncode(const Image& img, J_COLOR_SPACE color_space,
                                 const std::function<void(jpeg_compress_struct&)>& configure) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buffer, &size);
  c.image_width = img.width;
  c.image_height = img.height;
  c.input_components = img.channels;
  c.in_color_space = color_space;
  jpeg_set_defaults(&c);
  configure(c);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(img.row(static_cast<int>(c.next_scanline)));
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::string out(reinterpret_cast<char*>(buffer), size);
  std::free(buffer);
  return out;
}

}  // namespace recordflow::image::testing_util
