// The static rewrites that Compile() applies when an iterator is made (docs/pipeline.md,
// "Static optimisation"): the rewritten chain gives the elements, skip counts and checkpoints
// of the chain as written, and DebugString / stats show the plan that runs.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "recordflow/example/example.h"
#include "recordflow/image/image.h"
#include "recordflow/pipeline/dataset.h"
#include "recordflow/pipeline/pipeline_test_util.h"
#include "recordflow/vision/vision.h"

namespace recordflow::pipeline {
namespace {

using testing_util::ExpectFirstElementIsDataLossAt;
using testing_util::JpegOf;
using testing_util::Ok;
// n Examples with JPEGs of varied sizes; the ones in `corrupt` hold a truncated JPEG.
std::vector<std::string> Records(int n, const std::vector<int>& corrupt = {}) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    const bool bad = std::find(corrupt.begin(), corrupt.end(), i) != corrupt.end();
    std::string jpeg = JpegOf(60 + 9 * (i % 7), 50 + 5 * (i % 5), i);
    if (bad) jpeg = jpeg.substr(0, 300);
    example::Features f;
    f["image/encoded"] = example::Feature::Bytes({jpeg});
    f["image/class/label"] = example::Feature::Int64s({i});
    out.push_back(example::SerializeExample(f));
  }
  return out;
}

MapOptions OptionsOf(const vision::VisionOp& op) {
  MapOptions o;
  o.splits_batches = op.splits_batches;
  o.elementwise = op.elementwise;
  return o;
}

std::vector<Element> Drain(Iterator& it, int limit = -1) {
  std::vector<Element> out;
  Element e;
  while (limit < 0 || static_cast<int>(out.size()) < limit) {
    Result<bool> got = it.GetNext(&e);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (!got.ok() || !*got) break;
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<Element> RunAll(const Dataset& ds, bool optimize = true) {
  IteratorOptions o;
  o.optimize = optimize;
  auto it = Ok(ds.MakeIterator(o));
  return Drain(*it);
}

void ExpectSameBatches(const std::vector<Element>& a, const std::vector<Element>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE("batch " + std::to_string(i));
    ASSERT_EQ(a[i].tensors.size(), 1u);
    ASSERT_EQ(b[i].tensors.size(), 1u);
    ASSERT_EQ(a[i].tensors[0].shape, b[i].tensors[0].shape);
    ASSERT_EQ(a[i].tensors[0].size_bytes, b[i].tensors[0].size_bytes);
    EXPECT_EQ(std::memcmp(a[i].tensors[0].data.get(), b[i].tensors[0].data.get(),
                          a[i].tensors[0].size_bytes),
              0);
    ASSERT_EQ(a[i].columns.size(), 1u);
    EXPECT_EQ(a[i].columns[0].key, b[i].columns[0].key);
    EXPECT_EQ(a[i].columns[0].int64s, b[i].columns[0].int64s);
    ASSERT_EQ(a[i].positions.size(), b[i].positions.size());
    for (size_t j = 0; j < a[i].positions.size(); ++j) {
      EXPECT_EQ(a[i].positions[j].index, b[i].positions[j].index);
      EXPECT_EQ(a[i].positions[j].epoch, b[i].positions[j].epoch);
    }
  }
}

vision::VisionOp Train(uint64_t seed,
                       format::CorruptionPolicy policy = format::CorruptionPolicy::kRaise) {
  vision::ImagenetTrainOptions o;
  o.size = 24;
  o.seed = seed;
  o.on_corruption = policy;
  return Ok(vision::ImagenetTrain(o));
}

TEST(OptimizeTest, ElementwiseMapBeforeBatchRunsAfterItAndThePlanSaysSo) {
  vision::VisionOp op = Train(1);
  ASSERT_TRUE(op.elementwise);
  const Dataset written =
      Ok(Ok(Dataset::FromRecords(Records(10)).Map(op.fn, op.name, OptionsOf(op))).Batch(4));
  const std::string plan = written.DebugString();
  EXPECT_NE(plan.find("records(10) -> batch(4) -> map(imagenet_train(24))"), std::string::npos)
      << plan;
  EXPECT_NE(plan.find("[rewrites: map(imagenet_train(24)) -> batch(4) runs as batch(4) -> "
                      "map(imagenet_train(24))"),
            std::string::npos)
      << plan;
  // The stage the iterator reports is the one that ran: the map after the batch.
  auto it = Ok(written.MakeIterator());
  EXPECT_EQ(Drain(*it).size(), 3u);
  const PipelineStats stats = it->stats();
  ASSERT_GE(stats.stages.size(), 2u);
  EXPECT_EQ(stats.stages[1].name, "batch(4) -> map(imagenet_train(24))");
  // optimize = false runs the chain as written.
  IteratorOptions off;
  off.optimize = false;
  auto plain = Ok(written.MakeIterator(off));
  EXPECT_EQ(Drain(*plain).size(), 3u);
  EXPECT_EQ(plain->stats().stages[1].name, "map(imagenet_train(24)) -> batch(4)");
  // Already in the best order: nothing to rewrite.
  const Dataset best =
      Ok(Ok(Dataset::FromRecords(Records(10)).Batch(4)).Map(op.fn, op.name, OptionsOf(op)));
  EXPECT_EQ(best.DebugString(), "records(10) -> batch(4) -> map(imagenet_train(24))");
}

TEST(OptimizeTest, MapsNotDeclaredElementwiseStayOnSingleRecords) {
  std::atomic<int> calls{0};
  std::atomic<int> batched_calls{0};
  MapFn count = [&](Element& e) {
    ++calls;
    if (e.batched) ++batched_calls;
    return Status::OK();
  };
  vision::VisionOp op = Train(1);
  // map(count) is not element-wise: it stays before the batch; the preset after it moves.
  const Dataset ds = Ok(Ok(Ok(Dataset::FromRecords(Records(10)).Map(count, "count"))
                               .Map(op.fn, op.name, OptionsOf(op)))
                            .Batch(5, /*drop_remainder=*/true));
  const std::string plan = ds.DebugString();
  EXPECT_NE(plan.find("records(10) -> map(count) -> batch(5, drop_remainder) -> "
                      "map(imagenet_train(24))"),
            std::string::npos)
      << plan;
  EXPECT_EQ(RunAll(ds).size(), 2u);
  EXPECT_EQ(calls.load(), 10);
  EXPECT_EQ(batched_calls.load(), 0);
}

TEST(OptimizeTest, BothOrdersGiveBitIdenticalBatchesOverEpochs) {
  const std::vector<std::string> recs = Records(37);
  for (bool drop : {false, true}) {
    SCOPED_TRACE(drop ? "drop_remainder" : "keep remainder");
    vision::VisionOp op = Train(11);
    const Dataset src = Dataset::FromRecords(recs).Repeat(2);
    const Dataset map_batch = Ok(Ok(src.Map(op.fn, op.name, OptionsOf(op))).Batch(8, drop));
    const Dataset batch_map = Ok(Ok(src.Batch(8, drop)).Map(op.fn, op.name, OptionsOf(op)));
    const std::vector<Element> want = RunAll(batch_map);
    ASSERT_EQ(want.size(), drop ? 9u : 10u);
    ExpectSameBatches(RunAll(map_batch), want);
    // And the chain as written, per record, is what the rewrite replaces, bit for bit.
    ExpectSameBatches(RunAll(map_batch, /*optimize=*/false), want);
  }
}

TEST(OptimizeTest, SkippedRecordsAndErrorsAreThoseOfTheWrittenOrder) {
  const std::vector<std::string> recs = Records(30, {4, 5, 17, 29});
  const auto skip = format::CorruptionPolicy::kSkip;
  vision::VisionOp written = Train(5, skip);
  vision::VisionOp rewritten = Train(5, skip);
  const Dataset src = Dataset::FromRecords(recs);
  const std::vector<Element> a =
      RunAll(Ok(Ok(src.Map(written.fn, written.name, OptionsOf(written))).Batch(8)), false);
  const std::vector<Element> b =
      RunAll(Ok(Ok(src.Map(rewritten.fn, rewritten.name, OptionsOf(rewritten))).Batch(8)));
  ExpectSameBatches(b, a);
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b[0].tensors[0].shape[0], 6);  // records 4 and 5 dropped
  EXPECT_EQ(b[3].tensors[0].shape[0], 5);  // 24..29 without 29
  EXPECT_EQ(written.skipped_records(), 4u);
  EXPECT_EQ(rewritten.skipped_records(), 4u);
  // Raised: the same first bad record either way.
  vision::VisionOp raise = Train(5);
  for (bool optimize : {false, true}) {
    IteratorOptions o;
    o.optimize = optimize;
    auto it = Ok(Ok(Ok(src.Map(raise.fn, raise.name, OptionsOf(raise))).Batch(8)).MakeIterator(o));
    ASSERT_NO_FATAL_FAILURE(ExpectFirstElementIsDataLossAt(*it, "record 4 of file #0"));
  }
}

// A checkpoint saves each pending batch's input records, not where an op ran: checkpoints of
// the written and the rewritten chain restore into each other.
TEST(OptimizeTest, CheckpointsRestoreAcrossTheRewrite) {
  const std::vector<std::string> recs = Records(29);
  vision::VisionOp op = Train(3);
  const Dataset ds = Ok(Ok(Dataset::FromRecords(recs).Repeat(2).Shuffle({7, uint64_t{9}, true}))
                            .Map(op.fn, op.name, OptionsOf(op)));
  const Dataset batched = Ok(ds.Batch(4));
  const std::vector<Element> want = RunAll(batched, false);
  ASSERT_EQ(want.size(), 15u);
  for (int at : {0, 1, 6, 14}) {
    for (bool save_optimized : {false, true}) {
      SCOPED_TRACE("checkpoint after " + std::to_string(at) + " batches, saved " +
                   (save_optimized ? "optimized" : "as written"));
      IteratorOptions save;
      save.optimize = save_optimized;
      auto it = Ok(batched.MakeIterator(save));
      std::vector<Element> got = Drain(*it, at);
      const std::string state = Ok(it->Checkpoint());
      it.reset();
      IteratorOptions load;
      load.optimize = !save_optimized;
      auto restored =
          Ok(batched.Restore(std::as_bytes(std::span(state.data(), state.size())), load));
      for (Element& e : Drain(*restored)) got.push_back(std::move(e));
      ExpectSameBatches(got, want);
    }
  }
}

}  // namespace
}  // namespace recordflow::pipeline
