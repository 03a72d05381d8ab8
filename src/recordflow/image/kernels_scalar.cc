// The scalar backend of the image kernels (see kernels_internal.h; flags in CMakeLists.txt).
#include "kernels_internal.h"

namespace recordflow::image::internal {
namespace scalar_backend {
namespace {
#include "kernels_body.inc"
}  // namespace
}  // namespace scalar_backend

const Kernels& ScalarKernels() {
  static const Kernels kKernels{"scalar",
                                scalar_backend::VerticalU8,
                                scalar_backend::Horizontal,
                                scalar_backend::VerticalU8Q,
                                scalar_backend::PrepareHorizontalQ,
                                scalar_backend::HorizontalQ,
                                scalar_backend::NormalizeRow};
  return kKernels;
}

}  // namespace recordflow::image::internal
