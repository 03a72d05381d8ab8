// The ImageNet presets as recipes of composable ops (see vision.h, compose.h).
#include "recordflow/vision/vision.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "recordflow/vision/compose.h"

namespace recordflow::vision {
namespace {

using image::Box;

Status CheckCommon(const CommonOptions& c) {
  if (c.size <= 0 || c.size > 16384) return InvalidArgumentError("size must be in 1..16384");
  if (c.image_key.empty() || c.label_key.empty()) return InvalidArgumentError("empty feature key");
  for (int i = 0; i < 3; ++i) {
    if (!(c.std[i] > 0)) return InvalidArgumentError("std must be positive");
  }
  return Status::OK();
}

// The recipe of a preset: its ops after the (fused) decode, then dtype and normalization.
RecipeOptions Recipe(const CommonOptions& c, std::vector<OpSpec> ops, std::string name) {
  RecipeOptions r;
  ops.push_back(ToDtypeOp{c.dtype, true});
  if (c.dtype != image::TensorType::kUint8) ops.push_back(NormalizeOp{c.mean, c.std});
  r.ops = std::move(ops);
  r.image_key = c.image_key;
  r.label_key = c.label_key;
  r.image_output = c.image_output;
  r.label_output = c.label_output;
  r.label_mode = LabelMode::kInt;
  r.default_label = c.default_label;
  r.layout = c.layout;
  r.dct_scaling = c.dct_scaling;
  r.max_pixels = c.max_pixels;
  r.on_corruption = c.on_corruption;
  r.name = std::move(name);
  return r;
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
  RandomResizedCropOp crop;
  crop.height = crop.width = options.size;
  crop.crop = options.crop;
  crop.interpolation = options.interpolation;
  RecipeOptions r = Recipe(options, {crop, RandomHorizontalFlipOp{options.flip_probability}},
                           "imagenet_train(" + std::to_string(options.size) + ")");
  r.seed = options.seed;
  return Compose(std::move(r));
}

Result<VisionOp> ImagenetEval(ImagenetEvalOptions options) {
  RF_RETURN_IF_ERROR(CheckCommon(options));
  if (options.resize <= 0) return InvalidArgumentError("resize must be positive");
  ResizeOp resize;
  resize.shorter = options.resize;
  resize.interpolation = options.interpolation;
  RecipeOptions r = Recipe(options, {resize, CenterCropOp{options.size, options.size}},
                           "imagenet_eval(" + std::to_string(options.size) + ", " +
                               std::to_string(options.resize) + ")");
  r.seed = 0;  // no randomness
  return Compose(std::move(r));
}

}  // namespace recordflow::vision
