// The avx2 backend of the image kernels (see kernels_internal.h; flags in CMakeLists.txt).
#include "kernels_internal.h"

#if defined(__AVX2__)
#include <immintrin.h>
#define RF_KERNEL_AVX2 1  // the hand-written paths in kernels_body.inc
#endif

namespace recordflow::image::internal {
namespace avx2_backend {
namespace {
#include "kernels_body.inc"
}  // namespace
}  // namespace avx2_backend

const Kernels& Avx2Kernels() {
  static const Kernels kKernels{"avx2",
                                avx2_backend::VerticalU8,
                                avx2_backend::Horizontal,
                                avx2_backend::VerticalU8Q,
                                avx2_backend::PrepareHorizontalQ,
                                avx2_backend::HorizontalQ,
                                avx2_backend::NormalizeRow};
  return kKernels;
}

}  // namespace recordflow::image::internal
