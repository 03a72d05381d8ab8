// Private helpers of the image layer.
#pragma once

#include "recordflow/image/image.h"

namespace recordflow::image::internal {

// Converts between 1 (gray), 2 (gray+alpha), 3 (RGB) and 4 (RGBA) channels: alpha is dropped
// or set opaque, gray is replicated, color becomes gray by the BT.601 luma weights.
Image ConvertChannels(const Image& image, int channels);

// The number of scans (SOS markers) in a JPEG, counted by walking its markers and skipping the
// entropy-coded data (memchr speed; no decoding). Stops counting at EOI, at the first
// malformed byte, or (when stop_after > 0) past stop_after. Lets a decoder refuse a progressive
// file with too many scans before any scan is decoded: each scan is a pass over every block of the
// image.
int CountJpegScans(std::span<const std::byte> data, int stop_after);

// The kResourceExhausted status for a JPEG with more than max_scans scans; `scans` > 0 when
// counted before decoding (0: found by libjpeg's progress monitor while decoding).
Status TooManyScans(int max_scans, int scans = 0);

}  // namespace recordflow::image::internal
