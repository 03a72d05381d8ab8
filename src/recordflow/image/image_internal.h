// Private helpers of the image layer.
#pragma once

#include "recordflow/image/image.h"

namespace recordflow::image::internal {

// Converts between 1 (gray), 2 (gray+alpha), 3 (RGB) and 4 (RGBA) channels: alpha is dropped
// or set opaque, gray is replicated, color becomes gray by the BT.601 luma weights.
Image ConvertChannels(const Image& image, int channels);

}  // namespace recordflow::image::internal
