// Bindings for the image and convert layers: convert (paths and Python data), extract,
// probe_image, encode_jpeg.
// Options arrive as a dict built by python/recordflow/convert.py, which owns the keyword
// signature and its documentation; summaries go back as JSON text.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <string>
#include <vector>

#include "errors.h"
#include "recordflow/convert/convert.h"
#include "recordflow/convert/input_source.h"
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

// Calls `progress` (a Python callable or None) from o.progress, with the GIL.
void SetProgress(nb::object progress, convert::ConvertOptions* o) {
  if (!progress.is_none()) {
    // The callable is held through a shared_ptr: copies of o.progress made without the GIL
    // then touch no Python reference count; the last reference is `o`'s, dropped with the GIL.
    auto callback = std::make_shared<nb::object>(std::move(progress));
    o->progress = [callback](const convert::ConvertProgress& p) {
      nb::gil_scoped_acquire acquire;
      try {
        (*callback)(p.done, p.total, p.skipped, p.bytes_out, p.seconds);
      } catch (nb::python_error& e) {
        e.discard_as_unraisable("recordflow.convert progress callback");
      }
    };
  }
}

std::string Convert(const std::string& src, const std::string& dst, const nb::dict& options,
                    nb::object progress) {
  convert::ConvertOptions o = ToOptions(options);
  SetProgress(std::move(progress), &o);
  return ValueOrThrow(WithoutGil([&] { return convert::Convert(src, dst, o); })).ToJson();
}

// Python data: `items` yields (image bytes or None, labels, serialized Example of the other
// features, transcoded) per row (built by converter.py); each is spooled to `spool_path` as it
// comes, then the native converter plans, writes and summarizes with the GIL released.
std::string ConvertItems(nb::iterable items, const std::string& dst, const nb::dict& options,
                         const std::string& spool_path, const std::string& name,
                         std::optional<std::vector<std::string>> class_names, nb::object progress) {
  convert::ConvertOptions o = ToOptions(options);
  ThrowIfError(convert::CheckDestination(dst, o));
  std::unique_ptr<convert::SpooledSource> source =
      ValueOrThrow(convert::SpooledSource::Create(spool_path, name, std::move(class_names)));
  for (nb::handle row : items) {
    auto [image, labels, extra, transcoded] =
        nb::cast<std::tuple<std::optional<nb::bytes>, std::vector<int64_t>, nb::bytes, bool>>(row);
    std::optional<std::string_view> image_view;
    if (image) image_view = std::string_view(image->c_str(), image->size());
    const std::string_view extra_view(extra.c_str(), extra.size());
    // The bytes objects stay referenced by this frame, so their buffers outlive the write.
    ThrowIfError(WithoutGil([&, labels = std::move(labels), transcoded = transcoded]() mutable {
      return source->Add(image_view, std::move(labels), extra_view, transcoded);
    }));
  }
  SetProgress(std::move(progress), &o);
  return ValueOrThrow(WithoutGil([&] { return convert::Convert(*source, dst, o); })).ToJson();
}

std::string Extract(const std::vector<std::string>& files, const std::string& out_dir,
                    const nb::object& compression, bool overwrite, const std::string& labels_csv) {
  convert::ExtractOptions o;
  if (!compression.is_none()) {
    o.compression = ValueOrThrow(format::ParseCompression(nb::cast<std::string>(compression)));
  }
  o.overwrite = overwrite;
  o.labels_csv = labels_csv;
  return ValueOrThrow(WithoutGil([&] { return convert::Extract(files, out_dir, o); })).ToJson();
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
  std::string out = ValueOrThrow(WithoutGil([&] { return image::EncodeJpeg(img, o); }));
  return nb::bytes(out.data(), out.size());
}

}  // namespace

void RegisterConvert(nb::module_& m) {
  m.def("_convert", &Convert, "src"_a, "dst"_a, "options"_a, "progress"_a = nb::none());
  m.def("_convert_items", &ConvertItems, "items"_a, "dst"_a, "options"_a, "spool_path"_a, "name"_a,
        "class_names"_a = nb::none(), "progress"_a = nb::none());
  m.def("_extract", &Extract, "files"_a, "out_dir"_a, "compression"_a = nb::none(),
        "overwrite"_a = false, "labels_csv"_a = "labels.csv");
  m.def("probe_image", &ProbeImage, "data"_a,
        "Header of an encoded image (JPEG, PNG, GIF, BMP, WebP) without decoding: dict of "
        "format, width, height, channels, colorspace, orientation, progressive.");
  m.def("encode_jpeg", &EncodeJpeg, "array"_a, "quality"_a = 95, "subsampling"_a = "4:2:0",
        "Encodes an HxW or HxWxC (C = 1, 3; 2/4 drop alpha) uint8 array as JPEG bytes.");
}

}  // namespace recordflow::python
