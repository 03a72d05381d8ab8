#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "recordflow/image/image_test_util.h"
#include "recordflow/image/warp_internal.h"

namespace recordflow::image::internal {
namespace {

Image Noise(int w, int h, int c) {
  Image img = image::testing_util::BlankImage(w, h, c);
  uint32_t r = 7;
  for (uint8_t& p : img.pixels) {
    r = r * 1664525u + 1013904223u;
    p = static_cast<uint8_t>(r >> 24);
  }
  return img;
}

// Every row kernel (the AVX2 gather included) against the definition evaluated per pixel in
// 32.32 fixed point: rotations and shears whose rows enter and leave the image, touch its last
// pixel (where the 4-byte gather must not read past the end), and rows entirely outside.
TEST(WarpTest, NearestAndBilinearRowsEqualThePerPixelDefinition) {
  for (int c : {1, 3, 4}) {
    const Image img = Noise(61, 47, c);
    const uint8_t fill[4] = {9, 8, 7, 6};
    for (double deg : {0.0, 3.0, 15.0, -40.0, 90.0, 135.0, 200.0}) {
      const double a = deg * M_PI / 180, cs = std::cos(a), sn = std::sin(a);
      for (int y = -20; y < 80; y += 3) {
        const int width = 73;
        WarpRow r;
        r.sx0 = cs * -6.0 - sn * (y - 23.0) + 30.0;
        r.sy0 = sn * -6.0 + cs * (y - 23.0) + 23.0;
        r.dx = cs;
        r.dy = sn;
        ASSERT_TRUE(WarpRowFits(r, width));
        std::vector<uint8_t> out(static_cast<size_t>(width) * c, 0);
        WarpNearestRow(img, r, width, fill, out.data());
        const auto fx = [](double v) { return static_cast<int64_t>(std::floor(v * 4294967296.0)); };
        for (int x = 0; x < width; ++x) {
          const int64_t sx = fx(r.sx0 + 0.5) + x * fx(r.dx), sy = fx(r.sy0 + 0.5) + x * fx(r.dy);
          const bool in = sx >= 0 && sy >= 0 && (sx >> 32) < img.width && (sy >> 32) < img.height;
          for (int k = 0; k < c; ++k) {
            const uint8_t want =
                in ? img.row(static_cast<int>(sy >> 32))[(sx >> 32) * c + k] : fill[k];
            ASSERT_EQ(out[static_cast<size_t>(x) * c + k], want)
                << "c " << c << " deg " << deg << " y " << y << " x " << x;
          }
        }
        std::vector<uint8_t> bil(static_cast<size_t>(width) * c, 0);
        int lo = 0, hi = 0;
        WarpBilinearInterior(img, r, width, bil.data(), &lo, &hi);
        for (int x = 0; x < width; ++x) {
          const double px = r.sx0 + x * r.dx, py = r.sy0 + x * r.dy;
          const bool interior = px >= 0 && py >= 0 && px < img.width - 1 && py < img.height - 1;
          // Exactly the pixels with all four taps inside (up to a rounding at the boundary).
          if (std::abs(px) > 1e-6 && std::abs(py) > 1e-6 && std::abs(px - (img.width - 1)) > 1e-6 &&
              std::abs(py - (img.height - 1)) > 1e-6) {
            ASSERT_EQ(x >= lo && x < hi, interior) << deg << " " << y << " " << x;
          }
          if (x < lo || x >= hi) continue;
          const int x0 = static_cast<int>(std::floor(px)), y0 = static_cast<int>(std::floor(py));
          const double ax = px - x0, ay = py - y0;
          for (int k = 0; k < c; ++k) {
            const double v = (1 - ax) * (1 - ay) * img.row(y0)[x0 * c + k] +
                             ax * (1 - ay) * img.row(y0)[(x0 + 1) * c + k] +
                             (1 - ax) * ay * img.row(y0 + 1)[x0 * c + k] +
                             ax * ay * img.row(y0 + 1)[(x0 + 1) * c + k];
            ASSERT_LE(std::abs(bil[static_cast<size_t>(x) * c + k] - v), 0.75)
                << deg << " " << y << " " << x;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace recordflow::image::internal
