// NumPy uint8 arrays <-> image::Image for the bindings that take and give pixels (vision.cc,
// augment.cc). Arrays given back own their pixels (a capsule holds them): zero-copy.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "recordflow/image/image.h"

namespace recordflow::python {

using U8Array = nanobind::ndarray<const uint8_t, nanobind::c_contig, nanobind::device::cpu>;

// The shape of `a` (HxWxC or HxW, 1 to 4 channels) as an Image without pixels.
// Errors: ValueError for another shape.
inline image::Image ToImageShape(const U8Array& a) {
  if (a.ndim() != 3 && a.ndim() != 2) {
    throw nanobind::value_error("expected an HxWxC or HxW uint8 array");
  }
  image::Image img;
  img.height = static_cast<int>(a.shape(0));
  img.width = static_cast<int>(a.shape(1));
  img.channels = a.ndim() == 3 ? static_cast<int>(a.shape(2)) : 1;
  if (img.channels < 1 || img.channels > 4) throw nanobind::value_error("expected 1 to 4 channels");
  return img;
}

// `a` copied into an Image. Errors: as ToImageShape.
inline image::Image ToImage(const U8Array& a) {
  image::Image img = ToImageShape(a);
  img.pixels.assign(a.data(), a.data() + img.row_bytes() * img.height);
  return img;
}

// An HxWxC NumPy array that takes over `pixels` (uint8 or uint16).
template <typename T>
nanobind::object PixelsToArray(std::vector<T>&& pixels, int height, int width, int channels) {
  auto* owned = new std::vector<T>(std::move(pixels));
  nanobind::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  size_t shape[3] = {static_cast<size_t>(height), static_cast<size_t>(width),
                     static_cast<size_t>(channels)};
  return nanobind::cast(nanobind::ndarray<nanobind::numpy, T>(owned->data(), 3, shape, owner));
}

inline nanobind::object ToArray(image::Image&& img) {
  return PixelsToArray(std::move(img.pixels), img.height, img.width, img.channels);
}

}  // namespace recordflow::python
