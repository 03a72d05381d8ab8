// The sse2 backend of the image kernels (see kernels_internal.h; flags in CMakeLists.txt).
#include "kernels_internal.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#define RF_KERNEL_SSE2 1  // the hand-written paths in kernels_body.inc
#endif

namespace recordflow::image::internal {
namespace sse2_backend {
namespace {
#include "kernels_body.inc"
}  // namespace
}  // namespace sse2_backend

const Kernels& Sse2Kernels() {
  static const Kernels kKernels{"sse2",
                                sse2_backend::VerticalU8,
                                sse2_backend::Horizontal,
                                sse2_backend::VerticalU8Q,
                                sse2_backend::PrepareHorizontalQ,
                                sse2_backend::HorizontalQ,
                                sse2_backend::NormalizeRow};
  return kKernels;
}

}  // namespace recordflow::image::internal
