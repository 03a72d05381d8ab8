// Vision presets (recipes of the composable ops of compose.h): native pipeline maps that turn
// serialized tf.train.Examples holding encoded
// images into ready-to-train tensors.
//
//   ImagenetTrain: parse -> fused JPEG decode of a RandomResizedCrop (DCT-scaled when the
//                  crop shrinks by 2x or more) -> resize to size x size -> random flip ->
//                  normalize.
//   ImagenetEval:  parse -> fused decode of the center crop of the image resized so that its
//                  shorter side is `resize` -> resize to size x size -> normalize. (Resizing
//                  the region that the crop keeps is the same resampling as resize-then-crop,
//                  without computing the pixels the crop throws away.)
//
// The returned MapFn works on an unparsed element (one record or a batch of them: its image
// and label features are parsed with bytes as views), or on an element parsed earlier with
// both keys among its columns. It replaces the element's contents with a Tensor `image`
// [records, size, size, 3] (or [records, 3, size, size] for CHW) of the chosen dtype and an int64
// column `label` [records]; element.parsed becomes true.
//
// Randomness (train): each record's crop and flip come from ElementSeed(seed, file, record
// index, epoch): a deterministic pipeline gives the same tensors in every run, and each epoch
// new augmentations.
//
// Errors (messages name the record: file index, record index and byte offset): those of
// ImageDecoder::DecodeRegion (kDataLoss for corrupt image data, kInvalidArgument for bytes that
// are not an image, kResourceExhausted above max_pixels), and the parser's for missing keys.
// With on_corruption = kSkip, records whose image fails to decode are dropped from the batch
// and counted (skipped_records()); an element left empty is delivered with 0 rows.
//
// Thread safety: the MapFn is thread-safe (per-thread decoders and scratch buffers).
// Lifetime: the MapFn owns its options and parser; copies share them.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "recordflow/core/status.h"
#include "recordflow/format/record_reader.h"
#include "recordflow/image/ops.h"
#include "recordflow/pipeline/dataset.h"
#include "recordflow/vision/compose.h"

namespace recordflow::vision {

struct CommonOptions {
  int size = 224;
  std::string image_key = "image/encoded";
  std::string label_key = "image/class/label";
  // Output names.
  std::string image_output = "image";
  std::string label_output = "label";
  // Records without the label get this one; nullopt: the label is required.
  std::optional<int64_t> default_label = std::nullopt;
  image::Interpolation interpolation = image::Interpolation::kBilinear;
  std::array<float, 3> mean = {0.485f, 0.456f, 0.406f};
  std::array<float, 3> std = {0.229f, 0.224f, 0.225f};
  image::TensorType dtype = image::TensorType::kFloat32;
  image::Layout layout = image::Layout::kHWC;
  bool dct_scaling = true;
  uint64_t max_pixels = uint64_t{1} << 28;
  format::CorruptionPolicy on_corruption = format::CorruptionPolicy::kRaise;
};

struct ImagenetTrainOptions : CommonOptions {
  image::RandomResizedCropOptions crop;
  double flip_probability = 0.5;
  // nullopt: a random seed drawn when the MapFn is made.
  std::optional<uint64_t> seed;
};

struct ImagenetEvalOptions : CommonOptions {
  int resize = 256;  // shorter side before the center crop
};

// A preset as a pipeline op (Dataset::Map(op)), with counters shared by all copies of its
// MapFn: it spreads a batch over MapContext::threads threads (splits_batches), and each
// record's output depends only on its bytes and position, so `map(op).batch(n)` may run as
// `batch(n).map(op)` (elementwise).
using VisionOp = pipeline::MapOp;

// Errors: kInvalidArgument for bad options (size <= 0, scale/ratio ranges, std <= 0, empty
// keys).
Result<VisionOp> ImagenetTrain(ImagenetTrainOptions options = {});
Result<VisionOp> ImagenetEval(ImagenetEvalOptions options = {});

// The source box (in image pixels) that ImagenetEval resamples for a width x height image:
// the size x size center of the image resized to shorter side `resize`, mapped back.
image::Box EvalCropBox(int width, int height, int resize, int size);

}  // namespace recordflow::vision
