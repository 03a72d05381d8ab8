// The avx2 backend of the image kernels (see kernels_internal.h; flags in CMakeLists.txt).
#include "kernels_internal.h"

namespace recordflow::image::internal {
namespace avx2_backend {
namespace {
#include "kernels_body.inc"
}  // namespace
}  // namespace avx2_backend

const Kernels& Avx2Kernels() {
  static const Kernels kKernels{"avx2", avx2_backend::VerticalU8, avx2_backend::Horizontal,
                                avx2_backend::NormalizeRow};
  return kKernels;
}

}  // namespace recordflow::image::internal
