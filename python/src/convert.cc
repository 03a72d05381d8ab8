// Bindings for the image and convert layers: convert, extract, probe_image, encode_jpeg.
// Options arrive as a dict built by python/recordflow/convert.py, which owns the keyword
// signature and its documentation; summaries go back as JSON text.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <string>
#include <vector>

#include "errors.h"
#include "recordflow/convert/convert.h"
#include "recordflow/image/image.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace recordflow::python {
namespace {

template <typename T>
void Get(const nb::dict& d, const char* key, T* out) {
  if (d.contains(key)) *out = nb::cast<T>(d[key]);
}

convert::ConvertOptions ToOptions(const nb::dict& d) {
  convert::ConvertOptions o;
  Get(d, "val_fraction", &o.val_fraction);
  Get(d, "seed", &o.seed);
  Get(d, "shards", &o.train_shards);
  Get(d, "val_shards", &o.validation_shards);
  Get(d, "shard_size", &o.shard_size);
  Get(d, "shuffle", &o.shuffle);
  Get(d, "index", &o.write_index);
  Get(d, "sync", &o.sync);
  Get(d, "label_offset", &o.label_offset);
  Get(d, "resize_shorter", &o.resize_shorter);
  Get(d, "quality", &o.quality);
  Get(d, "force_rgb", &o.force_rgb);
  Get(d, "exif_orientation", &o.apply_exif_orientation);
  Get(d, "max_pixels", &o.max_pixels);
  Get(d, "image_column", &o.image_column);
  Get(d, "label_column", &o.label_column);
  Get(d, "label_separator", &o.label_separator);
  Get(d, "strict", &o.strict);
  Get(d, "resume", &o.resume);
  Get(d, "overwrite", &o.overwrite);
  Get(d, "num_threads", &o.num_threads);
  Get(d, "only_shards", &o.only_shards);
  if (d.contains("compression") && !d["compression"].is_none()) {
    o.compression = ValueOrThrow(format::ParseCompression(nb::cast<std::string>(d["compression"])));
  }
  if (d.contains("non_jpeg")) {
    o.non_jpeg = ValueOrThrow(convert::ParseNonJpegPolicy(nb::cast<std::string>(d["non_jpeg"])));
  }
  if (d.contains("verify")) {
    o.verify = ValueOrThrow(convert::ParseVerifyLevel(nb::cast<std::string>(d["verify"])));
  }
  return o;
}

std::string Convert(const std::string& src, const std::string& dst, const nb::dict& options,
                    nb::object progress) {
  convert::ConvertOptions o = ToOptions(options);
  if (!progress.is_none()) {
    // The callable is held through a shared_ptr: copies of o.progress made without the GIL
    // then touch no Python reference count; the last reference is `o`'s, dropped with the GIL.
    auto callback = std::make_shared<nb::object>(std::move(progress));
    o.progress = [callback](const convert::ConvertProgress& p) {
      nb::gil_scoped_acquire acquire;
      try {
        (*callback)(p.done, p.total, p.skipped, p.bytes_out, p.seconds);
      } catch (nb::python_error& e) {
        e.discard_as_unraisable("recordflow.convert progress callback");
      }
    };
  }
  Result<convert::ConvertSummary> summary = InternalError("not run");
  {
    nb::gil_scoped_release release;
    summary = convert::Convert(src, dst, o);
  }
  return ValueOrThrow(std::move(summary)).ToJson();
}

// One image of a Python input, checked and re-encoded as Convert would (verify, max_pixels,
// non_jpeg, resize_shorter, quality, force_rgb, exif_orientation from `options`).
nb::dict PrepareImage(nb::bytes data, const nb::dict& options) {
  const convert::ConvertOptions o = ToOptions(options);
  std::string bytes(data.c_str(), data.size());
  Result<convert::PreparedImage> prepared = InternalError("not run");
  {
    nb::gil_scoped_release release;
    prepared = convert::PrepareImage(std::move(bytes), o);
  }
  convert::PreparedImage p = ValueOrThrow(std::move(prepared));
  nb::dict d;
  d["encoded"] = nb::bytes(p.encoded.data(), p.encoded.size());
  d["format"] = p.format;
  d["width"] = p.width;
  d["height"] = p.height;
  d["channels"] = p.channels;
  d["colorspace"] = p.colorspace;
  d["transcoded"] = p.transcoded;
  return d;
}

std::string Extract(const std::vector<std::string>& files, const std::string& out_dir,
                    const nb::object& compression, bool overwrite, const std::string& labels_csv) {
  convert::ExtractOptions o;
  if (!compression.is_none()) {
    o.compression = ValueOrThrow(format::ParseCompression(nb::cast<std::string>(compression)));
  }
  o.overwrite = overwrite;
  o.labels_csv = labels_csv;
  Result<convert::ExtractSummary> summary = InternalError("not run");
  {
    nb::gil_scoped_release release;
    summary = convert::Extract(files, out_dir, o);
  }
  return ValueOrThrow(std::move(summary)).ToJson();
}

nb::dict ProbeImage(nb::bytes data) {
  auto span = std::as_bytes(std::span(data.c_str(), data.size()));
  image::ImageInfo info = ValueOrThrow(image::Probe(span));
  nb::dict d;
  d["format"] = std::string(image::ImageFormatName(info.format));
  d["width"] = info.width;
  d["height"] = info.height;
  d["channels"] = info.channels;
  d["colorspace"] = std::string(image::ColorSpaceName(info.colorspace));
  d["orientation"] = info.orientation;
  d["progressive"] = info.progressive;
  return d;
}

nb::bytes EncodeJpeg(nb::ndarray<const uint8_t, nb::c_contig, nb::device::cpu> array, int quality,
                     const std::string& subsampling) {
  if (array.ndim() != 2 && array.ndim() != 3)
    throw nb::value_error("expected an HxW or HxWxC uint8 array");
  image::Image img;
  img.height = static_cast<int>(array.shape(0));
  img.width = static_cast<int>(array.shape(1));
  img.channels = array.ndim() == 3 ? static_cast<int>(array.shape(2)) : 1;
  const auto* p = array.data();
  img.pixels.assign(p, p + array.size());
  image::JpegEncodeOptions o;
  o.quality = quality;
  o.subsampling = ValueOrThrow(image::ParseChromaSubsampling(subsampling));
  Result<std::string> jpeg = InternalError("not run");
  {
    nb::gil_scoped_release release;
    jpeg = image::EncodeJpeg(img, o);
  }
  std::string out = ValueOrThrow(std::move(jpeg));
  return nb::bytes(out.data(), out.size());
}

}  // namespace

void RegisterConvert(nb::module_& m) {
  m.def("_convert", &Convert, "src"_a, "dst"_a, "options"_a, "progress"_a = nb::none());
  m.def("_extract", &Extract, "files"_a, "out_dir"_a, "compression"_a = nb::none(),
        "overwrite"_a = false, "labels_csv"_a = "labels.csv");
  m.def("_prepare_image", &PrepareImage, "data"_a, "options"_a);
  m.def("probe_image", &ProbeImage, "data"_a,
        "Header of an encoded image (JPEG, PNG, GIF, BMP, WebP) without decoding: dict of "
        "format, width, height, channels, colorspace, orientation, progressive.");
  m.def("encode_jpeg", &EncodeJpeg, "array"_a, "quality"_a = 95, "subsampling"_a = "4:2:0",
        "Encodes an HxW or HxWxC (C = 1, 3; 2/4 drop alpha) uint8 array as JPEG bytes.");
}

}  // namespace recordflow::python
