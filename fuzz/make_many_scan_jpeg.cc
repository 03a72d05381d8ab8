// Writes a valid progressive grayscale JPEG with 704 scans (11 successive-approximation scans
// for the DC and for each AC coefficient) to stdout: the seed fuzz/corpus/image_decode/
// jpeg_704_scans and image_probe/jpeg_704_scans, which exercise the progressive scan limit
// (DecodeOptions::max_scans). Not part of the build:
//   c++ -std=c++20 fuzz/make_many_scan_jpeg.cc -ljpeg -o /tmp/many && /tmp/many > seed
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <jpeglib.h>

int main() {
  const int w = 24, h = 16;
  std::vector<jpeg_scan_info> script;
  for (int k = 0; k < 64; ++k) {
    for (int al = 10; al >= 0; --al) {
      jpeg_scan_info s{};
      s.comps_in_scan = 1;
      s.Ss = k;
      s.Se = k;
      s.Ah = al == 10 ? 0 : al + 1;
      s.Al = al;
      script.push_back(s);
    }
  }
  std::vector<unsigned char> pixels(static_cast<size_t>(w) * h);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<unsigned char>(i * 7);
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, stdout);
  c.image_width = w;
  c.image_height = h;
  c.input_components = 1;
  c.in_color_space = JCS_GRAYSCALE;
  jpeg_set_defaults(&c);
  c.scan_info = script.data();
  c.num_scans = static_cast<int>(script.size());
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = pixels.data() + static_cast<size_t>(c.next_scanline) * w;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  return 0;
}
