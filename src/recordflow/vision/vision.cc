// The ImageNet presets as pipeline MapFns (see vision.h).
#include "recordflow/vision/vision.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "recordflow/core/buffer_pool_internal.h"
#include "recordflow/core/thread_pool.h"
#include "recordflow/example/parse.h"

namespace recordflow::vision {
namespace {

using example::Column;
using image::Box;
using image::DecodedRegion;
using image::ImageDecoder;
using image::Rect;
using pipeline::Element;
using pipeline::Tensor;

// Idle output batches kept per preset for reuse: the consumer drops one batch per batch taken,
// so a couple suffice, and more would hold memory outside the iterator's budget. Two more are
// kept while the number of batches out wobbles (freeing one there meant mapping and zeroing a
// fresh 154 MB batch a few batches later, in 1 of ~10 batches of the ImageNet train pipeline);
// they go after 16 batches in which they were not needed.
constexpr size_t kIdleOutputBuffers = 2;
constexpr size_t kSurplusOutputBuffers = 2;
constexpr size_t kSurplusWindowBatches = 16;

// How one record's source box is chosen from its header.
enum class Mode { kTrain, kEval };

struct Preset {
  Mode mode;
  CommonOptions common;
  ImagenetTrainOptions train;  // kTrain
  int resize = 0;              // kEval
  uint64_t seed = 0;
  std::optional<example::ExampleParser> parser;
  image::NormalizeOptions normalize;
  std::shared_ptr<std::atomic<uint64_t>> skipped;
  // Output batches come back here when the consumer drops them (see BufferPool for why).
  std::shared_ptr<internal::BufferPool> outputs;
};

// Per pool thread, reused: the decoder (libjpeg state) and the decoded pixels of one image...
struct Scratch {
  ImageDecoder decoder;
  DecodedRegion region;
};

// ...and the parse of a batch, whose columns the batch's images are read from.
struct ParseScratch {
  std::vector<Column> columns;
  std::vector<std::span<const std::byte>> spans;
};

std::string Where(const Element& e, size_t i) {
  if (i >= e.positions.size()) return "record " + std::to_string(i);
  const pipeline::RecordPosition& p = e.positions[i];
  return "record " + std::to_string(p.index) + " of file #" + std::to_string(p.file) +
         " (byte offset " + std::to_string(p.offset) + ", record " + std::to_string(i) +
         " of the element)";
}

// Decodes and augments one image into `out` (size * size * 3 values of the output dtype).
Status ProcessImage(const Preset& p, const Element& e, size_t i, std::span<const std::byte> data,
                    Scratch& s, std::span<std::byte> out) {
  const int size = p.common.size;
  RF_ASSIGN_OR_RETURN(image::ImageHeader header, s.decoder.ReadHeader(data));
  if (header.width <= 0 || header.height <= 0) return DataLossError("image of size 0");
  if (static_cast<uint64_t>(header.width) * static_cast<uint64_t>(header.height) >
      p.common.max_pixels) {
    return ResourceExhaustedError("image of " + std::to_string(header.width) + "x" +
                                  std::to_string(header.height) + " pixels is over the limit of " +
                                  std::to_string(p.common.max_pixels) + " pixels");
  }
  image::RegionDecodeOptions ro;
  ro.target_width = size;
  ro.target_height = size;
  ro.dct_scaling = p.common.dct_scaling;
  ro.max_pixels = p.common.max_pixels;
  image::NormalizeOptions norm = p.normalize;
  Box want;  // in image pixels
  if (p.mode == Mode::kTrain) {
    const pipeline::RecordPosition pos =
        i < e.positions.size() ? e.positions[i] : pipeline::RecordPosition{};
    image::Rng rng(image::ElementSeed(p.seed, pos.file, pos.index, pos.epoch));
    const Rect r = image::RandomResizedCropRect(header.width, header.height, p.train.crop, rng);
    norm.flip = rng.Uniform(0.0, 1.0) < p.train.flip_probability;
    ro.crop = r;
    want = Box{static_cast<double>(r.x), static_cast<double>(r.y), static_cast<double>(r.width),
               static_cast<double>(r.height)};
  } else {
    want = EvalCropBox(header.width, header.height, p.resize, size);
    // Resize-then-crop filters the kept pixels with their neighbours outside the crop: decode
    // a margin of the filter's support around it, clipped to the image (deliberately: the
    // margin is ours, not the caller's window).
    const int m = static_cast<int>(std::ceil(std::max(want.width, want.height) / size)) + 2;
    const int x0 = std::max(0, static_cast<int>(std::floor(want.x)) - m);
    const int y0 = std::max(0, static_cast<int>(std::floor(want.y)) - m);
    const int x1 = std::min(header.width, static_cast<int>(std::ceil(want.x + want.width)) + m);
    const int y1 = std::min(header.height, static_cast<int>(std::ceil(want.y + want.height)) + m);
    ro.crop = Rect{x0, y0, std::max(1, x1 - x0), std::max(1, y1 - y0)};
  }
  RF_RETURN_IF_ERROR(s.decoder.DecodeRegion(data, ro, &s.region));
  // The wanted box in the decoded region's pixels.
  const double d = s.region.scale_denom;
  Box box{s.region.box.x + (want.x - ro.crop->x) / d, s.region.box.y + (want.y - ro.crop->y) / d,
          want.width / d, want.height / d};
  box.x = std::max(0.0, box.x);
  box.y = std::max(0.0, box.y);
  box.width = std::min(box.width, s.region.image.width - box.x);
  box.height = std::min(box.height, s.region.image.height - box.y);
  // Resample and normalise row by row (the flip by mirrored taps), straight into the batch.
  return image::ResampleNormalizeInto(s.region.image, box, size, size, p.common.interpolation, norm,
                                      out);
}

Status Run(const Preset& p, Element& e, const pipeline::MapContext& context) {
  thread_local ParseScratch s;
  const CommonOptions& c = p.common;
  const Column* images = nullptr;
  const Column* labels = nullptr;
  std::vector<Column> parsed_before;
  if (!e.parsed) {
    s.spans.clear();
    for (const auto& r : e.records) s.spans.push_back(std::as_bytes(std::span(r.data(), r.size())));
    example::ParseOptions po;
    po.max_parallelism = 1;  // already on a pool thread
    po.bytes_as_views = true;
    RF_RETURN_IF_ERROR(p.parser->Parse(s.spans, &s.columns, po));
    images = &s.columns[0];
    labels = &s.columns[1];
  } else {
    for (const Column& col : e.columns) {
      if (col.key == c.image_key) images = &col;
      if (col.key == c.label_key) labels = &col;
    }
    if (images == nullptr || images->dtype != example::DType::kBytes || images->ragged) {
      return InvalidArgumentError("the parsed element has no dense bytes feature '" + c.image_key +
                                  "'");
    }
    if (labels == nullptr || labels->dtype != example::DType::kInt64 || labels->ragged) {
      return InvalidArgumentError("the parsed element has no dense int64 feature '" + c.label_key +
                                  "'");
    }
  }
  const size_t n = static_cast<size_t>(images->num_values());
  if (static_cast<size_t>(labels->int64s.size()) != n) {
    return InvalidArgumentError("'" + c.label_key + "' must hold one value per record");
  }
  auto image_bytes = [&](size_t i) -> std::span<const std::byte> {
    if (!images->bytes_views.empty()) return images->bytes_views[i];
    const int64_t b = images->bytes_offsets[i], end = images->bytes_offsets[i + 1];
    return std::as_bytes(std::span(images->bytes_data.data() + b, static_cast<size_t>(end - b)));
  };
  const size_t per_image = static_cast<size_t>(c.size) * c.size * 3 * DTypeSize(c.dtype);
  Tensor t;
  t.key = c.image_output;
  t.dtype = c.dtype;
  // Every byte handed out is written below.
  t.data = p.outputs->Acquire(per_image * n);
  Column label;
  label.key = c.label_output;
  label.dtype = example::DType::kInt64;
  label.int64s.reserve(n);
  // Each image into its own slot, on up to context.threads threads claiming images one at a time.
  std::vector<Status> failed(n);
  std::atomic<size_t> next{0};
  std::atomic<bool> any_failed{false};
  const bool skip = c.on_corruption == format::CorruptionPolicy::kSkip;
  // context.cancelled(): the iterator closed and the batch would be dropped; stop decoding it.
  auto work = [&](size_t, size_t) {
    thread_local Scratch mine;
    // After an error that stops the batch the rest need not be decoded, but every image
    // claimed is: claims go in order, so the first failing image of the batch is always met.
    size_t i = 0;
    while (!(!skip && any_failed.load(std::memory_order_relaxed)) && !context.cancelled() &&
           (i = next.fetch_add(1, std::memory_order_relaxed)) < n) {
      std::span<std::byte> out(t.data.get() + i * per_image, per_image);
      Status st = ProcessImage(p, e, i, image_bytes(i), mine, out);
      if (!st.ok()) {
        failed[i] = std::move(st);
        any_failed.store(true, std::memory_order_relaxed);
      }
    }
  };
  const int threads = std::max(1, context.threads);
  if (threads > 1 && n > 1) {
    ParallelFor(static_cast<size_t>(threads), 1, threads, work);
  } else {
    work(0, 1);
  }
  if (context.cancelled()) return CancelledError("the iterator closed");
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!failed[i].ok()) {
      // Positions stay those of all records read: checkpoints count records, not outputs.
      if (skip) {
        p.skipped->fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      // The first failing record in the batch, whichever thread met it first.
      const Status& st = failed[i];
      return Status(st.code(),
                    "image '" + c.image_key + "' of " + Where(e, i) + ": " + st.message());
    }
    if (kept != i) {
      std::memmove(t.data.get() + kept * per_image, t.data.get() + i * per_image, per_image);
    }
    label.int64s.push_back(labels->int64s[i]);
    ++kept;
  }
  t.size_bytes = kept * per_image;
  if (c.layout == image::Layout::kHWC) {
    t.shape = {static_cast<int64_t>(kept), c.size, c.size, 3};
  } else {
    t.shape = {static_cast<int64_t>(kept), 3, c.size, c.size};
  }
  label.shape = {static_cast<int64_t>(kept)};
  e.columns.clear();
  e.columns.push_back(std::move(label));
  e.tensors.clear();
  e.tensors.push_back(std::move(t));
  e.records.clear();
  e.parsed = true;
  return Status::OK();
}

Status CheckCommon(const CommonOptions& c) {
  if (c.size <= 0 || c.size > 16384) return InvalidArgumentError("size must be in 1..16384");
  if (c.image_key.empty() || c.label_key.empty()) return InvalidArgumentError("empty feature key");
  for (int i = 0; i < 3; ++i) {
    if (!(c.std[i] > 0)) return InvalidArgumentError("std must be positive");
  }
  return Status::OK();
}

Result<VisionOp> Make(std::shared_ptr<Preset> p, std::string name) {
  std::vector<example::FeatureSpec> specs;
  specs.push_back(example::FeatureSpec::FixedLen(p->common.image_key, example::DType::kBytes));
  std::optional<example::Feature> def;
  if (p->common.default_label) def = example::Feature::Int64s({*p->common.default_label});
  specs.push_back(
      example::FeatureSpec::FixedLen(p->common.label_key, example::DType::kInt64, {}, def));
  RF_ASSIGN_OR_RETURN(example::ExampleParser parser,
                      example::ExampleParser::Create(std::move(specs)));
  p->parser.emplace(std::move(parser));
  p->normalize.mean = p->common.mean;
  p->normalize.std = p->common.std;
  p->normalize.type = p->common.dtype;
  p->normalize.layout = p->common.layout;
  p->skipped = std::make_shared<std::atomic<uint64_t>>(0);
  p->outputs = internal::BufferPool::Create(kIdleOutputBuffers, kSurplusOutputBuffers,
                                            kSurplusWindowBatches);
  VisionOp op;
  op.skipped = p->skipped;
  op.name = std::move(name);
  op.fn = [p](Element& e, const pipeline::MapContext& context) { return Run(*p, e, context); };
  op.splits_batches = true;
  op.elementwise = true;
  return op;
}

}  // namespace

Box EvalCropBox(int width, int height, int resize, int size) {
  // torchvision Resize(int): the shorter side becomes `resize`, the longer int(resize * l / s).
  int rw, rh;
  if (width <= height) {
    rw = resize;
    rh = static_cast<int>(static_cast<int64_t>(resize) * height / width);
  } else {
    rh = resize;
    rw = static_cast<int>(static_cast<int64_t>(resize) * width / height);
  }
  const double sx = static_cast<double>(width) / rw, sy = static_cast<double>(height) / rh;
  const int cw = std::min(size, rw), ch = std::min(size, rh);
  const double ox = std::nearbyint((rw - cw) / 2.0), oy = std::nearbyint((rh - ch) / 2.0);
  return Box{ox * sx, oy * sy, cw * sx, ch * sy};
}

Result<VisionOp> ImagenetTrain(ImagenetTrainOptions options) {
  RF_RETURN_IF_ERROR(CheckCommon(options));
  const auto& cr = options.crop;
  if (!(cr.scale[0] > 0 && cr.scale[0] <= cr.scale[1]) ||
      !(cr.ratio[0] > 0 && cr.ratio[0] <= cr.ratio[1])) {
    return InvalidArgumentError("scale and ratio must be increasing positive ranges");
  }
  auto p = std::make_shared<Preset>(
      Preset{Mode::kTrain, options, options, 0, 0, std::nullopt, {}, {}, {}});
  p->seed = options.seed ? *options.seed : std::random_device{}() * 0x100000001ull;
  return Make(std::move(p), "imagenet_train(" + std::to_string(options.size) + ")");
}

Result<VisionOp> ImagenetEval(ImagenetEvalOptions options) {
  RF_RETURN_IF_ERROR(CheckCommon(options));
  if (options.resize <= 0) return InvalidArgumentError("resize must be positive");
  auto p = std::make_shared<Preset>(
      Preset{Mode::kEval, options, {}, options.resize, 0, std::nullopt, {}, {}, {}});
  return Make(std::move(p), "imagenet_eval(" + std::to_string(options.size) + ", " +
                                std::to_string(options.resize) + ")");
}

}  // namespace recordflow::vision
