#include "recordflow/vision/compose.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "recordflow/example/example.h"
#include "recordflow/image/image.h"
#include "recordflow/pipeline/pipeline_test_util.h"
#include "recordflow/vision/vision.h"

namespace recordflow::vision {
namespace {

using pipeline::Dataset;
using pipeline::Element;
using pipeline::testing_util::ExpectSameFirstTensors;
using pipeline::testing_util::JpegOf;
using pipeline::testing_util::Ok;
using pipeline::testing_util::RunAll;

// A black w x h image with a white rectangle [x0, x1) x [y0, y1).
std::string JpegWithRect(int w, int h, int x0, int y0, int x1, int y1) {
  image::Image img;
  img.width = w, img.height = h, img.channels = 3;
  img.pixels.assign(img.row_bytes() * h, 0);
  for (int y = y0; y < y1; ++y) {
    for (int x = x0; x < x1; ++x) {
      for (int c = 0; c < 3; ++c) img.pixels[(static_cast<size_t>(y) * w + x) * 3 + c] = 255;
    }
  }
  image::JpegEncodeOptions o;
  o.quality = 100;
  o.subsampling = image::ChromaSubsampling::k444;
  return Ok(image::EncodeJpeg(img, o));
}

std::vector<std::string> Records(int n, const std::vector<int>& corrupt = {}) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    example::Features f;
    std::string jpeg = JpegOf(100 + 9 * i, 80 + 5 * i, i);
    if (std::find(corrupt.begin(), corrupt.end(), i) != corrupt.end()) jpeg.resize(300);
    f["image/encoded"] = example::Feature::Bytes({jpeg});
    f["image/class/label"] = example::Feature::Int64s({i});
    f["id"] = example::Feature::Bytes({"rec" + std::to_string(i)});
    std::vector<int64_t> labels;
    for (int k = 0; k <= i % 3; ++k) labels.push_back((i + k) % 5);
    f["labels"] = example::Feature::Int64s(labels);
    out.push_back(example::SerializeExample(f));
  }
  return out;
}

std::vector<OpSpec> GeometryChain() {
  ResizeOp resize;
  resize.shorter = 72;
  RandomRotationOp rot;
  rot.min_degrees = -25;
  rot.max_degrees = 25;
  rot.interpolation = image::Interpolation::kBilinear;
  PadOp pad;
  pad.left = pad.right = 3;
  pad.top = pad.bottom = 5;
  pad.mode = PadMode::kReflect;
  return {resize,
          rot,
          pad,
          CenterCropOp{60, 64},
          RandomVerticalFlipOp{0.5},
          RandomHorizontalFlipOp{0.5},
          Rotate90Op{1},
          ToDtypeOp{image::TensorType::kFloat32, true},
          NormalizeOp{}};
}

TEST(ComposeTest, GeometryChainIsDeterministicAcrossRunsAndThreads) {
  RecipeOptions o;
  o.ops = GeometryChain();
  o.seed = 11;
  pipeline::MapOp op = Ok(Compose(o));
  EXPECT_TRUE(op.splits_batches);
  Dataset batched = Ok(Dataset::FromRecords(Records(21)).Batch(8));
  std::vector<Element> serial = RunAll(Ok(batched.Map(op.fn, op.name, 1, false)));
  ASSERT_EQ(serial.size(), 3u);
  // CHW, and Rotate90 swapped the 60 x 64 crop.
  EXPECT_EQ(serial[0].tensors[0].shape, (std::vector<int64_t>{8, 3, 64, 60}));
  EXPECT_EQ(serial[2].tensors[0].shape[0], 5);
  for (int threads : {2, 3}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    ExpectSameFirstTensors(RunAll(Ok(batched.Map(op.fn, op.name, threads, true))), serial);
  }
  // A new op with the same seed: the same tensors; another seed: different ones.
  pipeline::MapOp again = Ok(Compose(o));
  ExpectSameFirstTensors(RunAll(Ok(batched.Map(again.fn, again.name, 2, true))), serial);
  o.seed = 12;
  pipeline::MapOp other = Ok(Compose(o));
  std::vector<Element> diff = RunAll(Ok(batched.Map(other.fn, other.name, 1, false)));
  EXPECT_NE(std::memcmp(diff[0].tensors[0].data.get(), serial[0].tensors[0].data.get(),
                        serial[0].tensors[0].size_bytes),
            0);
}

TEST(ComposeTest, PresetEqualsItsRecipe) {
  ImagenetTrainOptions t;
  t.size = 48;
  t.seed = 9;
  pipeline::MapOp preset = Ok(ImagenetTrain(t));
  RecipeOptions o;
  RandomResizedCropOp rrc;
  rrc.height = rrc.width = 48;
  o.ops = {rrc, RandomHorizontalFlipOp{}, ToDtypeOp{image::TensorType::kFloat32, true},
           NormalizeOp{}};
  o.layout = image::Layout::kHWC;
  o.seed = 9;
  pipeline::MapOp recipe = Ok(Compose(o));
  Dataset batched = Ok(Dataset::FromRecords(Records(9)).Batch(4));
  ExpectSameFirstTensors(RunAll(Ok(batched.Map(recipe.fn, recipe.name, 2, true))),
                         RunAll(Ok(batched.Map(preset.fn, preset.name, 2, true))));
}

TEST(ComposeTest, BadParametersAreInvalidArgumentNamingTheOp) {
  auto code = [](std::vector<OpSpec> ops) {
    RecipeOptions o;
    o.ops = std::move(ops);
    return Compose(o).status();
  };
  RandomResizedCropOp bad_scale;
  bad_scale.crop.scale = {0.9, 0.1};
  Status s = code({bad_scale});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("op #0 (RandomResizedCrop)"), std::string::npos) << s.message();
  ResizeOp shorter;
  shorter.shorter = 32;
  s = code({shorter});  // the size varies per image
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("varies per image"), std::string::npos) << s.message();
  s = code({CenterCropOp{8, 8}, NormalizeOp{}});  // Normalize on uint8
  EXPECT_NE(s.message().find("op #1 (Normalize)"), std::string::npos) << s.message();
  s = code({ToDtypeOp{}, CenterCropOp{8, 8}});  // an image op after ToDtype
  EXPECT_NE(s.message().find("op #1 (CenterCrop)"), std::string::npos) << s.message();
  s = code({CenterCropOp{0, 8}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  s = code({CenterCropOp{8, 8}, RandomHorizontalFlipOp{1.5}});
  EXPECT_NE(s.message().find("p must be in [0, 1]"), std::string::npos) << s.message();
  ResizeOp no_aa;
  no_aa.height = no_aa.width = 8;
  no_aa.antialias = false;
  EXPECT_TRUE(code({no_aa}).ok());
  no_aa.interpolation = image::Interpolation::kBicubic;
  EXPECT_TRUE(code({no_aa}).ok());
  RandomRotationOp rot;
  rot.interpolation = image::Interpolation::kBicubic;  // torchvision's rotate: nearest, bilinear
  s = code({CenterCropOp{8, 8}, rot});
  EXPECT_NE(s.message().find("nearest or bilinear"), std::string::npos) << s.message();
  rot.interpolation = image::Interpolation::kNearest;
  rot.min_degrees = 10;
  rot.max_degrees = -10;
  EXPECT_EQ(code({CenterCropOp{8, 8}, rot}).code(), StatusCode::kInvalidArgument);
  PadOp pad;
  pad.left = -1;
  EXPECT_EQ(code({CenterCropOp{8, 8}, pad}).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(code({CenterCropOp{8, 8}}).ok());
}

TEST(ComposeTest, RotationBy90WithExpandEqualsRotate90) {
  std::vector<std::string> recs = Records(4);
  RandomRotationOp rot;
  rot.min_degrees = rot.max_degrees = 90;
  rot.expand = true;
  RecipeOptions a, b;
  a.ops = {CenterCropOp{40, 30}, rot};
  b.ops = {CenterCropOp{40, 30}, Rotate90Op{1}};
  a.seed = b.seed = 1;
  pipeline::MapOp oa = Ok(Compose(a)), ob = Ok(Compose(b));
  Dataset batched = Ok(Dataset::FromRecords(recs).Batch(4));
  std::vector<Element> ea = RunAll(Ok(batched.Map(oa.fn, oa.name, 1, false)));
  std::vector<Element> eb = RunAll(Ok(batched.Map(ob.fn, ob.name, 1, false)));
  EXPECT_EQ(ea[0].tensors[0].shape, (std::vector<int64_t>{4, 3, 30, 40}));
  ExpectSameFirstTensors(ea, eb);
}

TEST(ComposeTest, BoxesFollowCropsFlipsRotationsAndPadding) {
  // A 200 x 100 image whose white rectangle is the only box (pixels 120..160 x 20..60).
  example::Features f;
  f["image/encoded"] = example::Feature::Bytes({JpegWithRect(200, 100, 120, 20, 160, 60)});
  f["image/class/label"] = example::Feature::Int64s({3});
  // The white box, and a box that the center crop cuts away entirely.
  f["boxes"] = example::Feature::Floats({120, 20, 160, 60, 0, 0, 10, 10});
  std::vector<std::string> recs = {example::SerializeExample(f)};
  RecipeOptions o;
  // Center crop 100 x 100 (x offset 50), pad 10 left, flip both ways, quarter turn.
  PadOp pad;
  pad.left = 10;
  o.ops = {CenterCropOp{100, 100}, pad, RandomHorizontalFlipOp{1.0}, RandomVerticalFlipOp{1.0},
           Rotate90Op{1}};
  o.boxes_key = "boxes";
  o.boxes_normalized = false;
  o.layout = image::Layout::kHWC;
  o.seed = 0;
  pipeline::MapOp op = Ok(Compose(o));
  std::vector<Element> out =
      RunAll(Ok(Ok(Dataset::FromRecords(recs).Batch(1)).Map(op.fn, op.name)));
  ASSERT_EQ(out.size(), 1u);
  const Element& e = out[0];
  // White box: crop (x offset 50, clipped to the 100 wide crop) x 70..100, y 20..60; pad ->
  // x 80..110 of 110; hflip -> 0..30; vflip -> y 40..80; rot90 ccw of a 110 x 100 image maps
  // (x, y) to (y, 110 - x): x 40..80, y 80..110 of the 100 x 110 output. The other box:
  // crop -> x 0..0 (cut away), pad -> 10..10, hflip -> 100..100, vflip -> y 90..100, rot90 ->
  // x 90..100, y 10..10: empty, kept, masked.
  const example::Column* boxes = nullptr;
  const example::Column* mask = nullptr;
  for (const auto& c : e.columns) {
    if (c.key == "boxes") boxes = &c;
    if (c.key == "boxes_mask") mask = &c;
  }
  ASSERT_NE(boxes, nullptr);
  ASSERT_NE(mask, nullptr);
  EXPECT_EQ(boxes->floats, (std::vector<float>{40, 80, 80, 110, 90, 10, 100, 10}));
  EXPECT_EQ(mask->int64s, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(boxes->row_splits, (std::vector<int64_t>{0, 8}));
  // The pixels inside the box are white, those outside black.
  const pipeline::Tensor& t = e.tensors[0];
  ASSERT_EQ(t.shape, (std::vector<int64_t>{1, 110, 100, 3}));
  const auto* px = reinterpret_cast<const uint8_t*>(t.data.get());
  auto at = [&](int x, int y) { return px[(static_cast<size_t>(y) * 100 + x) * 3]; };
  EXPECT_GT(at(60, 95), 200);
  EXPECT_LT(at(20, 95), 50);
  EXPECT_LT(at(60, 60), 50);
}

TEST(ComposeTest, ExtraKeysAndMultiLabelsStayAlignedWhenRecordsAreSkipped) {
  RecipeOptions o;
  o.ops = {CenterCropOp{16, 16}};
  o.label_key = "labels";
  o.label_mode = LabelMode::kMultiHot;
  o.num_classes = 5;
  o.extra_keys = {example::FeatureSpec::FixedLen("id", example::DType::kBytes),
                  example::FeatureSpec::VarLen("labels", example::DType::kInt64)};
  o.label_output = "multi_hot";
  o.on_corruption = format::CorruptionPolicy::kSkip;
  pipeline::MapOp op = Ok(Compose(o));
  std::vector<Element> out = RunAll(
      Ok(Ok(Dataset::FromRecords(Records(6, {1, 4})).Batch(6)).Map(op.fn, op.name, 3, true)));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(op.skipped_records(), 2u);
  const Element& e = out[0];
  ASSERT_EQ(e.tensors.size(), 2u);
  EXPECT_EQ(e.tensors[0].shape, (std::vector<int64_t>{4, 3, 16, 16}));
  const pipeline::Tensor& hot = e.tensors[1];
  EXPECT_EQ(hot.key, "multi_hot");
  ASSERT_EQ(hot.shape, (std::vector<int64_t>{4, 5}));
  const auto* h = reinterpret_cast<const float*>(hot.data.get());
  // Records 0, 2, 3, 5 kept: labels {0}, {2, 3, 4}, {3}, {0, 1, 2} (as Records() builds them).
  const std::vector<std::vector<float>> want = {
      {1, 0, 0, 0, 0}, {0, 0, 1, 1, 1}, {0, 0, 0, 1, 0}, {1, 1, 1, 0, 0}};
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(std::vector<float>(h + r * 5, h + r * 5 + 5), want[r]) << "row " << r;
  }
  ASSERT_EQ(e.columns.size(), 2u);
  EXPECT_EQ(e.columns[0].key, "id");
  EXPECT_EQ(e.columns[0].shape, (std::vector<int64_t>{4}));
  std::vector<std::string> ids;
  for (size_t j = 0; j + 1 < e.columns[0].bytes_offsets.size(); ++j) {
    ids.push_back(e.columns[0].bytes_data.substr(
        e.columns[0].bytes_offsets[j],
        e.columns[0].bytes_offsets[j + 1] - e.columns[0].bytes_offsets[j]));
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"rec0", "rec2", "rec3", "rec5"}));
  EXPECT_EQ(e.columns[1].row_splits, (std::vector<int64_t>{0, 1, 4, 5, 8}));
  EXPECT_EQ(e.columns[1].shape, (std::vector<int64_t>{8}));
  // Raise: the error names the first corrupt record.
  o.on_corruption = format::CorruptionPolicy::kRaise;
  pipeline::MapOp raise = Ok(Compose(o));
  auto it = Ok(Ok(Ok(Dataset::FromRecords(Records(6, {1, 4})).Batch(6)).Map(raise.fn, raise.name))
                   .MakeIterator());
  Element e2;
  Result<bool> r = it->GetNext(&e2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("record 1 of file #0"), std::string::npos)
      << r.status().message();
}

TEST(ComposeTest, ResizeOutputSizeFollowsTorchvision) {
  ResizeOp r;
  r.shorter = 256;
  EXPECT_EQ(ResizeOutputSize(r, 500, 375), (std::array<int, 2>{256, 341}));
  EXPECT_EQ(ResizeOutputSize(r, 375, 500), (std::array<int, 2>{341, 256}));
  r.max_size = 300;
  // Longer side capped at 300, shorter int(300 * 256 / 341) = 225.
  EXPECT_EQ(ResizeOutputSize(r, 500, 375), (std::array<int, 2>{225, 300}));
}

}  // namespace
}  // namespace recordflow::vision
