// Row kernels of the affine warps (augment.cc's Affine / Rotate and compose's RandomRotation).
// An affine map sends output pixel x of a row to source position (sx0 + x dx, sy0 + x dy), in
// input pixels with pixel centers at integers: the kernels step it in 32.32 fixed point (no
// per-pixel multiply), find once per row the span of x whose samples lie inside the image, fill
// the rest in bulk and gather the span.
#pragma once

#include <cstdint>

#include "recordflow/image/image.h"

namespace recordflow::image::internal {

// A row's source positions: pixel x samples (sx0 + x * dx, sy0 + x * dy).
struct WarpRow {
  double sx0 = 0, sy0 = 0, dx = 0, dy = 0;
};

// True when the row's positions stay within the fixed-point range (|coordinate| < 2^30 over
// the whole row); the kernels below require it.
bool WarpRowFits(const WarpRow& r, int width);

// Nearest: out[x] = the input pixel at (floor(sx + 0.5), floor(sy + 0.5)) when inside the
// image, else `fill` (image.channels values).
void WarpNearestRow(const Image& image, const WarpRow& r, int width, const uint8_t* fill,
                    uint8_t* out);

// Bilinear, for the pixels whose four taps all lie inside the image: [*lo, *hi) of the row is
// written (16-bit fixed-point weights, rounded); the caller samples the others (where taps fall
// outside, blended with the fill) itself.
void WarpBilinearInterior(const Image& image, const WarpRow& r, int width, uint8_t* out, int* lo,
                          int* hi);

}  // namespace recordflow::image::internal
