#include "recordflow/vision/vision.h"

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "recordflow/example/example.h"
#include "recordflow/image/image.h"
#include "recordflow/pipeline/pipeline_test_util.h"

namespace recordflow::vision {
namespace {

using pipeline::Dataset;
using pipeline::Element;
using pipeline::testing_util::ExpectFirstElementIsDataLossAt;
using pipeline::testing_util::ExpectSameFirstTensors;
using pipeline::testing_util::JpegOf;
using pipeline::testing_util::Ok;
using pipeline::testing_util::RunAll;

std::vector<std::string> Records(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    example::Features f;
    f["image/encoded"] = example::Feature::Bytes({JpegOf(120 + 10 * i, 90 + 7 * i, i)});
    f["image/class/label"] = example::Feature::Int64s({i});
    out.push_back(example::SerializeExample(f));
  }
  return out;
}

TEST(VisionTest, TrainPresetMakesBatchesOfNormalizedImagesAndLabels) {
  ImagenetTrainOptions o;
  o.size = 64;
  o.seed = 7;
  VisionOp op = Ok(ImagenetTrain(o));
  Dataset ds = Ok(Ok(Dataset::FromRecords(Records(10)).Batch(4)).Map(op.fn, op.name, 2));
  std::vector<Element> out = RunAll(ds);
  ASSERT_EQ(out.size(), 3u);
  ASSERT_EQ(out[0].tensors.size(), 1u);
  const pipeline::Tensor& t = out[0].tensors[0];
  EXPECT_EQ(t.key, "image");
  EXPECT_EQ(t.shape, (std::vector<int64_t>{4, 64, 64, 3}));
  EXPECT_EQ(t.size_bytes, 4u * 64 * 64 * 3 * 4);
  EXPECT_EQ(out[2].tensors[0].shape[0], 2);
  ASSERT_EQ(out[1].columns.size(), 1u);
  EXPECT_EQ(out[1].columns[0].key, "label");
  EXPECT_EQ(out[1].columns[0].int64s, (std::vector<int64_t>{4, 5, 6, 7}));
  const float* v = reinterpret_cast<const float*>(t.data.get());
  for (size_t i = 0; i < t.size_bytes / 4; ++i) {
    ASSERT_GE(v[i], -2.2f);
    ASSERT_LE(v[i], 2.7f);
  }
  // Same seed, same tensors; the map before batch gives the same as after it.
  std::vector<Element> again =
      RunAll(Ok(Ok(Dataset::FromRecords(Records(10)).Map(op.fn, op.name)).Batch(4)));
  ASSERT_EQ(again.size(), 3u);
  for (size_t b = 0; b < 3; ++b) {
    ASSERT_EQ(again[b].tensors[0].shape, out[b].tensors[0].shape);
    EXPECT_EQ(std::memcmp(again[b].tensors[0].data.get(), out[b].tensors[0].data.get(),
                          out[b].tensors[0].size_bytes),
              0);
  }
  // Another epoch gives other crops.
  std::vector<Element> two =
      RunAll(Ok(Dataset::FromRecords(Records(4)).Repeat(2).Batch(4)).Map(op.fn, op.name).value());
  ASSERT_EQ(two.size(), 2u);
  EXPECT_NE(std::memcmp(two[0].tensors[0].data.get(), two[1].tensors[0].data.get(),
                        two[0].tensors[0].size_bytes),
            0);
}

// The flip is fused into the resample: with the same seed (same crops), flip_probability 1 gives
// exactly the mirror of flip_probability 0, in both layouts.
TEST(VisionTest, TrainFlipIsTheExactMirrorOfTheUnflippedCrop) {
  for (image::Layout layout : {image::Layout::kHWC, image::Layout::kCHW}) {
    std::vector<Element> got[2];
    for (int flip = 0; flip < 2; ++flip) {
      ImagenetTrainOptions o;
      o.size = 48;
      o.seed = 11;
      o.layout = layout;
      o.flip_probability = flip;
      VisionOp op = Ok(ImagenetTrain(o));
      got[flip] = RunAll(Ok(Ok(Dataset::FromRecords(Records(6)).Batch(3)).Map(op.fn, op.name)));
      ASSERT_EQ(got[flip].size(), 2u);
    }
    const int S = 48;
    for (size_t b = 0; b < 2; ++b) {
      const auto* plain = reinterpret_cast<const float*>(got[0][b].tensors[0].data.get());
      const auto* mirrored = reinterpret_cast<const float*>(got[1][b].tensors[0].data.get());
      for (int n = 0; n < 3; ++n) {
        for (int y = 0; y < S; ++y) {
          for (int x = 0; x < S; ++x) {
            for (int c = 0; c < 3; ++c) {
              auto at = [&](int xx) {
                return layout == image::Layout::kHWC
                           ? ((static_cast<size_t>(n) * S + y) * S + xx) * 3 + c
                           : ((static_cast<size_t>(n) * 3 + c) * S + y) * S + xx;
              };
              ASSERT_EQ(mirrored[at(x)], plain[at(S - 1 - x)]) << "batch " << b << " image " << n;
            }
          }
        }
      }
    }
  }
}

TEST(VisionTest, EvalPresetMatchesDecodeResizeCenterCrop) {
  ImagenetEvalOptions o;
  o.size = 32;
  o.resize = 40;
  o.dtype = image::TensorType::kUint8;
  o.dct_scaling = false;
  VisionOp op = Ok(ImagenetEval(o));
  std::vector<std::string> recs = Records(2);
  std::vector<Element> out =
      RunAll(Ok(Ok(Dataset::FromRecords(recs).Batch(2)).Map(op.fn, op.name)));
  ASSERT_EQ(out.size(), 1u);
  const uint8_t* got = reinterpret_cast<const uint8_t*>(out[0].tensors[0].data.get());
  // Reference: decode, resize shorter side to 40 (torchvision sizes), center crop 32.
  const std::string jpeg = JpegOf(120, 90, 0);
  image::Image full = Ok(image::DecodeImageRgb(std::as_bytes(std::span(jpeg.data(), jpeg.size()))));
  image::Image resized = Ok(image::Resample(full, 53, 40, image::Interpolation::kBilinear));
  image::Image want = Ok(image::CenterCrop(resized, 32, 32));
  int max_diff = 0;
  for (size_t i = 0; i < want.pixels.size(); ++i)
    max_diff = std::max(max_diff, std::abs(int{got[i]} - int{want.pixels[i]}));
  EXPECT_LE(max_diff, 1);
}

TEST(VisionTest, CorruptImageNamesTheRecordOrIsSkipped) {
  std::vector<std::string> recs = Records(3);
  example::Features f;
  f["image/encoded"] = example::Feature::Bytes({JpegOf(100, 80, 1).substr(0, 300)});
  f["image/class/label"] = example::Feature::Int64s({9});
  recs[1] = example::SerializeExample(f);
  ImagenetTrainOptions o;
  o.size = 32;
  VisionOp op = Ok(ImagenetTrain(o));
  auto it = Ok(Ok(Ok(Dataset::FromRecords(recs).Batch(3)).Map(op.fn, op.name)).MakeIterator());
  ASSERT_NO_FATAL_FAILURE(ExpectFirstElementIsDataLossAt(*it, "record 1 of file #0"));
  o.on_corruption = format::CorruptionPolicy::kSkip;
  VisionOp skip = Ok(ImagenetTrain(o));
  std::vector<Element> out =
      RunAll(Ok(Ok(Dataset::FromRecords(recs).Batch(3)).Map(skip.fn, skip.name)));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].tensors[0].shape[0], 2);
  EXPECT_EQ(out[0].columns[0].int64s, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(skip.skipped_records(), 1u);
}

// The presets spread a batch over the iterator's threads (splits_batches): the tensors, labels,
// skips and errors are those of one thread per batch, bit for bit.
std::vector<std::string> RecordsWithCorrupt(int n, std::vector<int> corrupt) {
  std::vector<std::string> recs = Records(n);
  for (int i : corrupt) {
    example::Features f;
    f["image/encoded"] = example::Feature::Bytes({JpegOf(100, 80, i).substr(0, 300)});
    f["image/class/label"] = example::Feature::Int64s({100 + i});
    recs[static_cast<size_t>(i)] = example::SerializeExample(f);
  }
  return recs;
}

void ExpectSameBatches(const std::vector<Element>& a, const std::vector<Element>& b) {
  ExpectSameFirstTensors(a, b);
  if (a.size() != b.size()) return;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].columns[0].int64s, b[i].columns[0].int64s) << "batch " << i;
  }
}

TEST(VisionTest, SplitBatchesEqualOneThreadPerBatch) {
  ASSERT_TRUE(ImagenetTrain().value().splits_batches);
  const std::vector<std::string> recs = RecordsWithCorrupt(37, {});
  for (int eval = 0; eval < 2; ++eval) {
    ImagenetTrainOptions to;
    to.size = 40;
    to.seed = 3;
    ImagenetEvalOptions eo;
    eo.size = 40;
    eo.resize = 48;
    VisionOp op = eval ? Ok(ImagenetEval(eo)) : Ok(ImagenetTrain(to));
    Dataset batched = Ok(Dataset::FromRecords(recs).Batch(16));
    std::vector<Element> serial = RunAll(Ok(batched.Map(op.fn, op.name, 1, false)));
    ASSERT_EQ(serial.size(), 3u);
    EXPECT_EQ(serial[2].tensors[0].shape[0], 5);
    for (int threads : {2, 3, 5}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + (eval ? " eval" : " train"));
      ExpectSameBatches(RunAll(Ok(batched.Map(op.fn, op.name, threads, true))), serial);
    }
  }
}

TEST(VisionTest, SplitBatchesSkipAndFailLikeOneThreadPerBatch) {
  const std::vector<std::string> recs = RecordsWithCorrupt(30, {4, 5, 17, 29});
  ImagenetTrainOptions o;
  o.size = 24;
  o.seed = 5;
  o.on_corruption = format::CorruptionPolicy::kSkip;
  VisionOp one = Ok(ImagenetTrain(o));
  VisionOp split = Ok(ImagenetTrain(o));
  Dataset batched = Ok(Dataset::FromRecords(recs).Batch(30));
  std::vector<Element> serial = RunAll(Ok(batched.Map(one.fn, one.name, 1, false)));
  ASSERT_EQ(serial.size(), 1u);
  EXPECT_EQ(serial[0].tensors[0].shape[0], 26);
  std::vector<Element> got = RunAll(Ok(batched.Map(split.fn, split.name, 4, true)));
  ExpectSameBatches(got, serial);
  std::vector<int64_t> want;
  for (int64_t i = 0; i < 30; ++i) {
    if (i != 4 && i != 5 && i != 17 && i != 29) want.push_back(i);
  }
  EXPECT_EQ(got[0].columns[0].int64s, want);
  EXPECT_EQ(split.skipped_records(), 4u);
  // Raised: always the batch's first bad record, whichever thread meets which first.
  o.on_corruption = format::CorruptionPolicy::kRaise;
  VisionOp raise = Ok(ImagenetTrain(o));
  for (int round = 0; round < 8; ++round) {
    auto it = Ok(Ok(batched.Map(raise.fn, raise.name, 4, true)).MakeIterator());
    ASSERT_NO_FATAL_FAILURE(ExpectFirstElementIsDataLossAt(*it, "record 4 of file #0"));
  }
}

}  // namespace
}  // namespace recordflow::vision
