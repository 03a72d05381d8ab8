// The pipeline conformance battery: every stage for order, cardinality, end of sequence,
// checkpoint/restore at several points, cancellation and error propagation; plus properties
// (exactly once, determinism, disjoint shards, shuffle quality, global permutation).
//
// Over 600 lines: one battery that every stage passes through, kept in one file so that a new
// stage cannot be added without meeting every case.
#include "recordflow/pipeline/dataset.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "recordflow/core/thread_pool.h"
#include "recordflow/example/example.h"
#include "recordflow/format/record_test_util.h"
#include "recordflow/format/record_writer.h"

namespace recordflow::pipeline {
namespace {

using format::testing::Bytes;
using format::testing::MakeTempDir;
using format::testing::Ok;

// Record j of file f is the Example {"id": f * 1000 + j, "name": "f<f>r<j>"}.
std::string Record(int f, int j) {
  example::Features features;
  features["id"] = example::Feature::Int64s({f * 1000 + j});
  features["name"] = example::Feature::Bytes({"f" + std::to_string(f) + "r" + std::to_string(j)});
  return example::SerializeExample(features);
}

struct Files {
  std::string dir;
  std::vector<std::string> paths;
  std::vector<int> counts;
};

Files WriteFiles(std::vector<int> counts, const std::string& suffix = ".tfrecord",
                 bool index = true) {
  Files f;
  f.dir = MakeTempDir();
  f.counts = counts;
  for (size_t i = 0; i < counts.size(); ++i) {
    char name[64];
    std::snprintf(name, sizeof(name), "/part-%03zu%s", i, suffix.c_str());
    const std::string path = f.dir + name;
    format::RecordWriterOptions o;
    o.write_index = index && suffix == ".tfrecord";
    auto w = format::RecordWriter::Open(path, o);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    for (int j = 0; j < counts[i]; ++j) {
      EXPECT_TRUE((*w)->WriteRecord(Bytes(Record(static_cast<int>(i), j))).ok());
    }
    EXPECT_TRUE((*w)->Close().ok());
    f.paths.push_back(path);
  }
  return f;
}

std::vector<int64_t> AllIds(const Files& f) {
  std::vector<int64_t> ids;
  for (size_t i = 0; i < f.counts.size(); ++i) {
    for (int j = 0; j < f.counts[i]; ++j) ids.push_back(static_cast<int64_t>(i) * 1000 + j);
  }
  return ids;
}

std::vector<example::FeatureSpec> Spec() {
  return {example::FeatureSpec::FixedLen("id", example::DType::kInt64),
          example::FeatureSpec::FixedLen("name", example::DType::kBytes)};
}

// The ids an element carries (parsed or not), appended to `out`.
void IdsOf(const Element& e, std::vector<int64_t>* out) {
  if (e.parsed) {
    for (int64_t v : e.columns[0].int64s) out->push_back(v);
    return;
  }
  for (const std::string& r : e.records) {
    auto ex = example::ParseExample(Bytes(r));
    ASSERT_TRUE(ex.ok());
    out->push_back(ex->at("id").int64s.at(0));
  }
}

// Reads up to `limit` elements (all when < 0); one "element" entry per GetNext so batch
// boundaries are compared too.
std::vector<std::vector<int64_t>> Drain(Iterator& it, int limit = -1) {
  std::vector<std::vector<int64_t>> out;
  while (limit < 0 || static_cast<int>(out.size()) < limit) {
    Element e;
    Result<bool> got = it.GetNext(&e);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (!got.ok() || !*got) break;
    std::vector<int64_t> ids;
    IdsOf(e, &ids);
    out.push_back(ids);
  }
  return out;
}

// Reads up to `limit` elements of a stream that must end in an error, appending their ids to
// `ids` and the error to `error`. Call under ASSERT_NO_FATAL_FAILURE.
void ReadIdsUntilError(Iterator& it, int limit, std::vector<int64_t>* ids, Status* error) {
  for (int i = 0; i < limit; ++i) {
    Element e;
    Result<bool> got = it.GetNext(&e);
    if (!got.ok()) {
      *error = got.status();
      break;
    }
    ASSERT_TRUE(*got) << "the stream ended without the missing file's error";
    IdsOf(e, ids);
  }
}

std::vector<int64_t> Flat(const std::vector<std::vector<int64_t>>& v) {
  std::vector<int64_t> out;
  for (const auto& e : v) out.insert(out.end(), e.begin(), e.end());
  return out;
}

std::vector<std::vector<int64_t>> RunAll(const Dataset& ds) {
  auto it = ds.MakeIterator();
  EXPECT_TRUE(it.ok()) << it.status().ToString();
  if (!it.ok()) return {};
  return Drain(**it);
}

// Every pipeline of the battery: a name and a builder over the same files.
struct Case {
  std::string name;
  std::function<Dataset(const Files&)> build;
};

std::vector<Case> Battery() {
  auto files = [](const Files& f, FilesOptions o = {}) {
    return Ok(Dataset::FromFiles(f.paths, o));
  };
  return {
      {"files", [=](const Files& f) { return files(f); }},
      {"shuffled_files",
       [=](const Files& f) {
         FilesOptions o;
         o.shuffle_files = true;
         o.seed = 7;
         return files(f, o).Repeat(2);
       }},
      {"shard_by_file", [=](const Files& f) { return Ok(files(f).Shard(2, 1)); }},
      {"shard_by_record", [=](const Files& f) { return Ok(files(f).Take(1000).Shard(3, 2)); }},
      {"interleave_sync",
       [=](const Files& f) {
         return Ok(files(f).Interleave({.cycle_length = 2, .block_length = 3, .num_parallel = 0}));
       }},
      {"interleave_parallel",
       [=](const Files& f) {
         return Ok(files(f).Interleave({.cycle_length = 3, .block_length = 2, .num_parallel = 3}));
       }},
      {"shuffle_repeat",
       [=](const Files& f) {
         return Ok(files(f).Shuffle({.buffer_size = 50, .seed = 3})).Repeat(3);
       }},
      {"repeat_shuffle",
       [=](const Files& f) {
         return Ok(files(f).Repeat(2).Shuffle({.buffer_size = 64, .seed = 4}));
       }},
      {"global_shuffle", [=](const Files& f) { return Ok(files(f).GlobalShuffle(11)).Repeat(2); }},
      {"take_skip", [=](const Files& f) { return files(f).Skip(5).Take(100); }},
      {"memory_cache_repeat",
       [=](const Files& f) {
         return Ok(Ok(files(f).Take(60).Cache()).Shuffle({.buffer_size = 10, .seed = 1})).Repeat(3);
       }},
      {"batch_parse",
       [=](const Files& f) {
         return Ok(Ok(Ok(files(f).Shuffle({.buffer_size = 20, .seed = 9})).Batch(7)).Parse(Spec()));
       }},
      {"parse_batch_drop_repeat",
       [=](const Files& f) { return Ok(Ok(files(f).Parse(Spec())).Batch(16, true)).Repeat(2); }},
      {"batch_take_prefetch",
       [=](const Files& f) {
         return Ok(Ok(Ok(files(f).Batch(5)).Parse(Spec())).Prefetch(1)).Skip(2).Take(9);
       }},
  };
}

class BatteryTest : public ::testing::TestWithParam<size_t> {};

TEST_P(BatteryTest, CheckpointRestoreAtSeveralPointsGivesTheUninterruptedSequence) {
  const Case c = Battery()[GetParam()];
  SCOPED_TRACE(c.name);
  Files f = WriteFiles({37, 0, 120, 55, 81});
  Dataset ds = c.build(f);
  const auto full = RunAll(ds);
  ASSERT_FALSE(full.empty());
  // Deterministic: a second run gives the same elements.
  EXPECT_EQ(RunAll(ds), full);
  for (size_t k :
       {size_t{0}, size_t{1}, full.size() / 3, full.size() / 2, full.size() - 1, full.size()}) {
    SCOPED_TRACE("checkpoint after " + std::to_string(k));
    auto it = Ok(ds.MakeIterator());
    auto head = Drain(*it, static_cast<int>(k));
    ASSERT_EQ(head.size(), k);
    std::string state = Ok(it->Checkpoint());
    // The checkpointed iterator goes on unchanged.
    auto rest_same = Drain(*it);
    it.reset();
    auto restored = Ok(ds.Restore(Bytes(state)));
    auto rest = Drain(*restored);
    std::vector<std::vector<int64_t>> expected(full.begin() + static_cast<long>(k), full.end());
    EXPECT_EQ(rest, expected);
    EXPECT_EQ(rest_same, expected);
    // End of sequence is sticky.
    Element e;
    EXPECT_FALSE(Ok(restored->GetNext(&e)));
    EXPECT_FALSE(Ok(restored->GetNext(&e)));
  }
}

TEST_P(BatteryTest, CancellationMidStreamJoinsPromptly) {
  const Case c = Battery()[GetParam()];
  Files f = WriteFiles({200, 300, 100});
  Dataset ds = c.build(f);
  for (int n : {0, 1, 3}) {
    auto it = Ok(ds.MakeIterator());
    Drain(*it, n);
    it.reset();  // must not hang or leak (ASan/TSan runs check the latter)
  }
}

INSTANTIATE_TEST_SUITE_P(Stages, BatteryTest, ::testing::Range(size_t{0}, Battery().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return Battery()[info.param].name;
                         });

TEST(PipelineTest, FilesInOrderAndCardinality) {
  Files f = WriteFiles({3, 0, 4});
  auto ds = Ok(Dataset::FromFiles({f.dir + "/part-*.tfrecord"}));
  EXPECT_EQ(Flat(RunAll(ds)), AllIds(f));
  EXPECT_EQ(Flat(RunAll(ds.Repeat(3))).size(), 21u);
  EXPECT_EQ(Flat(RunAll(ds.Take(2))), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(Flat(RunAll(ds.Skip(4))), (std::vector<int64_t>{2001, 2002, 2003}));
  EXPECT_EQ(RunAll(ds.Skip(100)).size(), 0u);
  EXPECT_EQ(Dataset::FromFiles({f.dir + "/nothing-*"}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Dataset::FromFiles({}).status().code(), StatusCode::kInvalidArgument);
}

TEST(PipelineTest, ShardsAreDisjointAndCompleteByFileAndByRecord) {
  Files f = WriteFiles({10, 20, 30, 40, 50});
  auto ds = Ok(Dataset::FromFiles(f.paths));
  for (bool by_file : {true, false}) {
    std::vector<int64_t> all;
    for (int i = 0; i < 3; ++i) {
      Dataset shard = by_file ? Ok(ds.Shard(3, i)) : Ok(ds.Take(1 << 20).Shard(3, i));
      auto ids = Flat(RunAll(shard));
      all.insert(all.end(), ids.begin(), ids.end());
    }
    std::sort(all.begin(), all.end());
    EXPECT_EQ(all, AllIds(f)) << (by_file ? "by file" : "by record");
  }
  EXPECT_EQ(ds.Shard(2, 2).status().code(), StatusCode::kInvalidArgument);
}

TEST(PipelineTest, InterleaveOrderIsRoundRobinInBlocks) {
  Files f = WriteFiles({5, 3, 4});
  auto ds = Ok(Dataset::FromFiles(f.paths));
  const std::vector<int64_t> expected = {0, 1, 1000, 1001, 2, 3, 1002, 4, 2000, 2001, 2002, 2003};
  for (int parallel : {0, 2}) {
    auto il = Ok(ds.Interleave({.cycle_length = 2, .block_length = 2, .num_parallel = parallel}));
    EXPECT_EQ(Flat(RunAll(il)), expected) << "num_parallel " << parallel;
  }
  auto nondet = Ok(ds.Interleave({.cycle_length = 3, .num_parallel = 3, .deterministic = false}));
  auto ids = Flat(RunAll(nondet));
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, AllIds(f));
}

TEST(PipelineTest, ShuffleIsASeededPermutationThatMixesWell) {
  Files f = WriteFiles({2000});
  auto ds = Ok(Dataset::FromFiles(f.paths));
  auto a = Flat(RunAll(Ok(ds.Shuffle({.buffer_size = 2000, .seed = 1}))));
  auto b = Flat(RunAll(Ok(ds.Shuffle({.buffer_size = 2000, .seed = 1}))));
  auto c = Flat(RunAll(Ok(ds.Shuffle({.buffer_size = 2000, .seed = 2}))));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, AllIds(f));
  // A full-buffer shuffle is a uniform permutation: the mean absolute displacement of n items
  // is (n^2 - 1) / (3n) ~ 667 for n = 2000; its standard deviation over permutations is ~10.
  double displacement = 0;
  for (size_t i = 0; i < a.size(); ++i)
    displacement += std::abs(static_cast<double>(a[i]) - static_cast<double>(i));
  displacement /= static_cast<double>(a.size());
  EXPECT_NEAR(displacement, (2000.0 * 2000 - 1) / 6000, 60);
  // Adjacent outputs are uncorrelated: about half of them ascend.
  int ascending = 0;
  for (size_t i = 1; i < a.size(); ++i) ascending += a[i] > a[i - 1];
  EXPECT_NEAR(ascending, 1000, 100);
  // Reshuffled on every epoch, unless asked not to.
  auto epochs = RunAll(Ok(ds.Shuffle({.buffer_size = 2000, .seed = 5})).Repeat(2));
  auto flat = Flat(epochs);
  EXPECT_NE(std::vector<int64_t>(flat.begin(), flat.begin() + 2000),
            std::vector<int64_t>(flat.begin() + 2000, flat.end()));
  auto same = Flat(
      RunAll(Ok(ds.Shuffle({.buffer_size = 2000, .seed = 5, .reshuffle_each_iteration = false}))
                 .Repeat(2)));
  EXPECT_EQ(std::vector<int64_t>(same.begin(), same.begin() + 2000),
            std::vector<int64_t>(same.begin() + 2000, same.end()));
}

TEST(PipelineTest, GlobalShuffleIsAPermutationPerEpochAcrossFiles) {
  Files f = WriteFiles({100, 1, 250, 49});
  std::remove((f.paths[1] + ".idx").c_str());  // a missing index is built in memory
  auto ds = Ok(Dataset::FromFiles(f.paths));
  auto gs = Ok(ds.GlobalShuffle(42)).Repeat(2);
  auto ids = Flat(RunAll(gs));
  ASSERT_EQ(ids.size(), 800u);
  std::vector<int64_t> e0(ids.begin(), ids.begin() + 400), e1(ids.begin() + 400, ids.end());
  EXPECT_NE(e0, e1);
  std::sort(e0.begin(), e0.end());
  std::sort(e1.begin(), e1.end());
  EXPECT_EQ(e0, AllIds(f));
  EXPECT_EQ(e1, AllIds(f));
  // Records of all files mix from the start: the first 40 come from more than two files.
  std::set<int64_t> files_seen;
  for (size_t i = 0; i < 40; ++i) files_seen.insert(ids[i] / 1000);
  EXPECT_GE(files_seen.size(), 3u);
  Files gz = WriteFiles({3}, ".tfrecord.gz");
  EXPECT_EQ(Ok(Dataset::FromFiles(gz.paths)).GlobalShuffle(1).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(PipelineTest, BatchParseColumnsAndDropRemainder) {
  Files f = WriteFiles({10, 3});
  auto ds = Ok(Dataset::FromFiles(f.paths));
  auto it = Ok(Ok(Ok(ds.Batch(4)).Parse(Spec())).MakeIterator());
  std::vector<size_t> sizes;
  Element e;
  while (Ok(it->GetNext(&e))) {
    ASSERT_TRUE(e.parsed && e.batched);
    ASSERT_EQ(e.columns.size(), 2u);
    sizes.push_back(e.columns[0].int64s.size());
    EXPECT_EQ(e.columns[0].shape, std::vector<int64_t>{static_cast<int64_t>(sizes.back())});
    const auto& name = e.columns[1];
    const int64_t id = e.columns[0].int64s[0];
    EXPECT_EQ(name.bytes_data.substr(0, static_cast<size_t>(name.bytes_offsets[1])),
              "f" + std::to_string(id / 1000) + "r" + std::to_string(id % 1000));
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{4, 4, 4, 1}));
  auto dropped = RunAll(Ok(Ok(ds.Batch(4, true)).Parse(Spec())));
  EXPECT_EQ(dropped.size(), 3u);
  // Bytes as views into the element's records: the same values, no copy.
  auto views = Ok(Ok(Ok(ds.Batch(4)).Parse(Spec(), /*bytes_as_views=*/true)).MakeIterator());
  size_t n = 0;
  while (Ok(views->GetNext(&e))) {
    const auto& name = e.columns[1];
    ASSERT_EQ(name.bytes_views.size(), e.columns[0].int64s.size());
    ASSERT_EQ(e.records.size(), name.bytes_views.size());  // kept for the views
    for (size_t i = 0; i < name.bytes_views.size(); ++i, ++n) {
      const int64_t id = e.columns[0].int64s[i];
      const auto v = name.bytes_views[i];
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(v.data()), v.size()),
                "f" + std::to_string(id / 1000) + "r" + std::to_string(id % 1000));
    }
  }
  EXPECT_EQ(n, 13u);
  // parse before batch is the same as after it.
  EXPECT_EQ(RunAll(Ok(Ok(ds.Parse(Spec())).Batch(4))), RunAll(Ok(Ok(ds.Batch(4)).Parse(Spec()))));
}

TEST(PipelineTest, CorruptFileErrorArrivesInOrderWithFileAndOffset) {
  Files f = WriteFiles({5, 5});
  {
    std::fstream file(f.paths[1], std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(40);
    file.put('\x7f');
  }
  auto it = Ok(Ok(Dataset::FromFiles(f.paths)).MakeIterator());
  std::vector<int64_t> ids;
  Element e;
  Result<bool> got = true;
  while (true) {
    got = it->GetNext(&e);
    if (!got.ok() || !*got) break;
    IdsOf(e, &ids);
  }
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find("part-001"), std::string::npos) << got.status().ToString();
  EXPECT_NE(got.status().message().find("offset"), std::string::npos);
  // Everything before the bad record arrived, in order.
  ASSERT_GE(ids.size(), 5u);
  EXPECT_EQ(std::vector<int64_t>(ids.begin(), ids.begin() + 5),
            (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(it->GetNext(&e).status().code(), StatusCode::kFailedPrecondition);
  // With on_corruption=skip the stream goes on.
  FilesOptions skip;
  skip.on_corruption = format::CorruptionPolicy::kSkip;
  auto skipping = Flat(RunAll(Ok(Dataset::FromFiles(f.paths, skip))));
  EXPECT_GE(skipping.size(), 5u);
  EXPECT_LT(skipping.size(), 10u);
}

TEST(PipelineTest, ParseErrorNamesKeyFileAndRecord) {
  Files f = WriteFiles({6});
  auto spec = Spec();
  spec.push_back(example::FeatureSpec::FixedLen("missing", example::DType::kFloat32));
  auto it = Ok(Ok(Ok(Ok(Dataset::FromFiles(f.paths)).Batch(3)).Parse(spec)).MakeIterator());
  Element e;
  Result<bool> got = it->GetNext(&e);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(got.status().message().find("'missing'"), std::string::npos) << got.status().ToString();
  EXPECT_NE(got.status().message().find("part-000"), std::string::npos) << got.status().ToString();
}

// The failing record is located by the parser's index (data), not by reading its message: a
// feature key that itself reads "record 1" does not mislead it.
TEST(PipelineTest, ParseErrorLocatesTheFailingRecordByIndex) {
  std::vector<std::string> records;
  for (int j = 0; j < 6; ++j) {
    example::Features features;
    if (j != 4) features["record 1"] = example::Feature::Floats({1.0f});
    records.push_back(example::SerializeExample(features));
  }
  const std::vector<example::FeatureSpec> spec = {
      example::FeatureSpec::FixedLen("record 1", example::DType::kFloat32)};
  auto it = Ok(Ok(Dataset::FromRecords(records).Batch(6)).Parse(spec)).MakeIterator();
  ASSERT_TRUE(it.ok()) << it.status().ToString();
  Element e;
  Result<bool> got = (*it)->GetNext(&e);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(got.status().message().find("[record 4 of the batch is in-memory record 4 "),
            std::string::npos)
      << got.status().ToString();
}

TEST(PipelineTest, MapRunsNativeOpsInParallelInOrder) {
  Files f = WriteFiles({300});
  std::atomic<int> calls{0};
  auto double_ids = [&](Element& e) -> Status {
    ++calls;
    for (int64_t& v : e.columns[0].int64s) v *= 2;
    return Status();
  };
  auto ds = Ok(
      Ok(Ok(Ok(Dataset::FromFiles(f.paths)).Batch(10)).Parse(Spec())).Map(double_ids, "double", 2));
  auto ids = Flat(RunAll(ds));
  ASSERT_EQ(ids.size(), 300u);
  for (size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(ids[i], static_cast<int64_t>(2 * i));
  EXPECT_EQ(calls.load(), 30);
  auto failing = Ok(Ok(Dataset::FromFiles(f.paths))
                        .Map([](Element&) { return InvalidArgumentError("bad pixel"); }, "decode"));
  auto it = Ok(failing.MakeIterator());
  Element e;
  Result<bool> got = it->GetNext(&e);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("map 'decode': bad pixel"), std::string::npos);
}

// A map that splits batches itself gets the iterator's threads and one batch at a time; any
// other map, or the same map on single records, gets one thread and runs several at once.
TEST(PipelineTest, SplittingMapsRunOneBatchAtATimeWithAllThreads) {
  Files f = WriteFiles({200});
  struct Seen {
    std::mutex mu;
    int running = 0;
    int most_running = 0;
    std::vector<int> threads;
  };
  auto probe = [](Seen* seen) {
    return [seen](Element& e, const MapContext& context) -> Status {
      {
        std::lock_guard lock(seen->mu);
        seen->most_running = std::max(seen->most_running, ++seen->running);
        seen->threads.push_back(context.threads);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      for (int64_t& v : e.columns[0].int64s) v += 1;
      std::lock_guard lock(seen->mu);
      --seen->running;
      return Status();
    };
  };
  auto parsed = Ok(Ok(Ok(Dataset::FromFiles(f.paths)).Batch(10)).Parse(Spec()));
  for (bool splits : {true, false}) {
    Seen seen;
    auto it = Ok(Ok(parsed.Map(probe(&seen), "probe", 3, splits)).MakeIterator());
    auto ids = Flat(Drain(*it));
    ASSERT_EQ(ids.size(), 200u);
    // Busy time is summed over threads: a split batch keeps all 3 busy for its >= 2 ms.
    const PipelineStats stats = it->stats();
    ASSERT_EQ(stats.stages.size(), 3u);
    EXPECT_GE(stats.stages[1].busy_seconds, 20 * 0.002 * (splits ? 3 : 1)) << stats.Report();
    EXPECT_LT(stats.stages[1].busy_seconds, 20 * 1.0);
    for (size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(ids[i], static_cast<int64_t>(i) + 1);
    ASSERT_EQ(seen.threads.size(), 20u);
    for (int t : seen.threads) EXPECT_EQ(t, splits ? 3 : 1) << "splits " << splits;
    if (splits) {
      EXPECT_EQ(seen.most_running, 1);
    } else if (ThreadPool::Default().num_threads() > 1) {
      EXPECT_GT(seen.most_running, 1);  // 20 batches of 2 ms maps, on every pool thread
    }
  }
  EXPECT_EQ(MapContext().threads, 1);  // a context of its own (a direct call)
  // Before the batch, on single records: one thread, whatever the map says.
  Seen single;
  auto unbatched = Ok(Ok(Dataset::FromFiles(f.paths)).Take(30).Parse(Spec()));
  ASSERT_EQ(Flat(RunAll(Ok(unbatched.Map(probe(&single), "probe", 3, true)))).size(), 30u);
  for (int t : single.threads) EXPECT_EQ(t, 1);
}

// Closing an iterator tells a running map so (MapContext::cancelled), on every thread it spreads
// to.
TEST(PipelineTest, ClosingTheIteratorCancelsARunningMap) {
  Files f = WriteFiles({40});
  EXPECT_FALSE(MapContext().cancelled());  // a context of its own (a direct call)
  std::atomic<bool> started{false}, saw_cancel{false}, timed_out{false};
  auto slow = [&](Element&, const MapContext& context) -> Status {
    started = true;
    std::thread helper([&] {  // as a map's ParallelFor helper would
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (!context.cancelled()) {
        if (std::chrono::steady_clock::now() > give_up) {
          timed_out = true;
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      saw_cancel = true;
    });
    helper.join();
    return CancelledError("closed");
  };
  auto ds = Ok(Ok(Ok(Dataset::FromFiles(f.paths)).Batch(10)).Map(slow, "slow", 2, true));
  {
    auto it = Ok(ds.MakeIterator());
    while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }  // the destructor cancels and waits for the map
  EXPECT_TRUE(saw_cancel);
  EXPECT_FALSE(timed_out);
}

TEST(PipelineTest, CompressedFilesCheckpointByContent) {
  Files f = WriteFiles({40, 30}, ".tfrecord.gz");
  auto ds = Ok(Ok(Dataset::FromFiles(f.paths)).Shuffle({.buffer_size = 16, .seed = 2})).Repeat(2);
  const auto full = RunAll(ds);
  ASSERT_EQ(Flat(full).size(), 140u);
  auto it = Ok(ds.MakeIterator());
  auto head = Drain(*it, 77);
  std::string state = Ok(it->Checkpoint());
  auto rest = Drain(*Ok(ds.Restore(Bytes(state))));
  head.insert(head.end(), rest.begin(), rest.end());
  EXPECT_EQ(head, full);
}

TEST(PipelineTest, RestoreRejectsOtherPipelinesAndDamagedStates) {
  Files f = WriteFiles({20});
  auto ds = Ok(Dataset::FromFiles(f.paths));
  auto it = Ok(ds.MakeIterator());
  Drain(*it, 3);
  std::string state = Ok(it->Checkpoint());
  EXPECT_EQ(ds.Take(5).Restore(Bytes(state)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ds.Restore(Bytes(std::string("garbage"))).status().code(), StatusCode::kDataLoss);
  for (size_t cut : {size_t{3}, state.size() / 2, state.size() - 1}) {
    Result<std::unique_ptr<Iterator>> r = ds.Restore(Bytes(state.substr(0, cut)));
    EXPECT_FALSE(r.ok()) << cut;
  }
}

TEST(PipelineTest, UnseededShuffleSavesItsSeed) {
  Files f = WriteFiles({300});
  auto ds = Ok(Ok(Dataset::FromFiles(f.paths)).Shuffle({.buffer_size = 100}));
  auto it = Ok(ds.MakeIterator());
  auto head = Drain(*it, 10);
  std::string state = Ok(it->Checkpoint());
  auto rest = Drain(*it);
  EXPECT_EQ(Drain(*Ok(ds.Restore(Bytes(state)))), rest);
}

// tf.data's reshuffle_each_iteration: iteration k of a seeded pipeline is its own order, the
// same in every run; augmentation epochs differ per iteration; a checkpoint carries k.
TEST(PipelineTest, EachIterationOfASeededPipelineIsANewDeterministicOrder) {
  Files f = WriteFiles({40, 35, 25});
  FilesOptions fo;
  fo.shuffle_files = true;
  fo.seed = 3;
  std::vector<uint64_t> epochs_seen;
  std::mutex mu;
  auto record_epochs = [&](Element& e) -> Status {
    std::lock_guard lock(mu);
    for (const RecordPosition& p : e.positions) epochs_seen.push_back(p.epoch);
    return Status();
  };
  auto ds = Ok(
      Ok(Ok(Ok(Dataset::FromFiles(f.paths, fo)).Shuffle({.buffer_size = 30, .seed = 5})).Batch(10))
          .Map(record_epochs, "epochs", 1));
  auto run = [&](uint64_t iteration) {
    IteratorOptions o;
    o.iteration = iteration;
    epochs_seen.clear();
    return Flat(Drain(*Ok(ds.MakeIterator(o))));
  };
  const auto first = run(0);
  const std::set<uint64_t> epochs0(epochs_seen.begin(), epochs_seen.end());
  const auto second = run(1);
  const std::set<uint64_t> epochs1(epochs_seen.begin(), epochs_seen.end());
  EXPECT_EQ(first, Flat(RunAll(ds)));  // iteration 0 is the default iterator's order
  EXPECT_NE(first, second);
  EXPECT_EQ(second, run(1));
  EXPECT_NE(second, run(2));
  auto sorted = second;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, AllIds(f));
  EXPECT_NE(epochs0, epochs1);  // per-element augmentation seeds see another epoch
  // Restoring a checkpoint of iteration 1 continues iteration 1, whatever the options say.
  IteratorOptions o;
  o.iteration = 1;
  auto it = Ok(ds.MakeIterator(o));
  auto head = Flat(Drain(*it, 3));
  const std::string state = Ok(it->Checkpoint());
  auto rest = Flat(Drain(*Ok(ds.Restore(Bytes(state)))));
  head.insert(head.end(), rest.begin(), rest.end());
  EXPECT_EQ(head, second);
}

TEST(PipelineTest, StatsReportCountsStages) {
  Files f = WriteFiles({100});
  auto it = Ok(Ok(Ok(Ok(Dataset::FromFiles(f.paths)).Batch(10)).Parse(Spec())).MakeIterator());
  Drain(*it);
  PipelineStats s = it->stats();
  EXPECT_EQ(s.elements_delivered, 10u);
  ASSERT_EQ(s.stages.size(), 3u);
  EXPECT_EQ(s.stages[0].elements, 100u);
  EXPECT_EQ(s.stages[1].elements, 10u);
  EXPECT_NE(s.Report().find("consumer waited"), std::string::npos);
}

}  // namespace
// GetNextFor gives up after its timeout without consuming anything (the Python bindings wait in
// such slices to run Ctrl-C handlers), and destroying the iterator stops an endless skip.
TEST(PipelineTest, GetNextForTimesOutWithoutConsumingAndCloseStopsALongSkip) {
  auto slow = Dataset::FromRecords({"a"}).Repeat(-1).Skip(int64_t{1} << 60);
  auto it = slow.MakeIterator();
  ASSERT_TRUE(it.ok()) << it.status().ToString();
  Element e;
  bool timed_out = false;
  const auto t0 = std::chrono::steady_clock::now();
  auto got = (*it)->GetNextFor(&e, std::chrono::milliseconds(50), &timed_out);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(timed_out);
  EXPECT_FALSE(*got);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  const auto t1 = std::chrono::steady_clock::now();
  it->reset();  // cancels the producer mid-skip and joins it
  EXPECT_LT(std::chrono::steady_clock::now() - t1, std::chrono::seconds(1));

  // A timed-out call loses no element: the sequence is the same as with GetNext.
  auto ds = Dataset::FromRecords({"r0", "r1", "r2"}).Skip(1);
  auto it2 = ds.MakeIterator();
  ASSERT_TRUE(it2.ok());
  std::vector<std::string> seen;
  while (true) {
    auto r = (*it2)->GetNextFor(&e, std::chrono::nanoseconds(1), &timed_out);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if (timed_out) continue;
    if (!*r) break;
    seen.push_back(e.records.at(0));
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"r1", "r2"}));
}

// With read-ahead, interleave opens each slot's file on the pool as the slot takes it (many
// small shards open concurrently, ahead of need): a file that cannot be opened fails when the
// consumer reaches its slot, after the records of the slots before it, naming the file.
TEST(InterleaveReadAheadTest, OpenErrorArrivesAtItsSlotsTurnNamingTheFile) {
  Files f = WriteFiles({3, 3, 3, 3});
  Dataset ds = Ok(Ok(Dataset::FromFiles(f.paths))
                      .Interleave({.cycle_length = 4, .block_length = 1, .num_parallel = 2}));
  ASSERT_EQ(std::remove(f.paths[2].c_str()), 0);
  auto it = Ok(ds.MakeIterator());
  std::vector<int64_t> ids;
  Status error;
  ASSERT_NO_FATAL_FAILURE(ReadIdsUntilError(*it, 20, &ids, &error));
  EXPECT_EQ(ids, (std::vector<int64_t>{0, 1000}));
  EXPECT_EQ(error.code(), StatusCode::kNotFound) << error.ToString();
  EXPECT_NE(error.message().find(f.paths[2]), std::string::npos) << error.ToString();

  // The same when the file was opened ahead of the cycle (small files: the files after the
  // cycle's are opened early): files 0-3 and the first record of file 4, then file 5's error.
  Files g = WriteFiles(std::vector<int>(8, 3));
  ds = Ok(Ok(Dataset::FromFiles(g.paths))
              .Interleave({.cycle_length = 2, .block_length = 1, .num_parallel = 2}));
  ASSERT_EQ(std::remove(g.paths[5].c_str()), 0);
  it = Ok(ds.MakeIterator());
  ids.clear();
  error = Status();
  ASSERT_NO_FATAL_FAILURE(ReadIdsUntilError(*it, 40, &ids, &error));
  EXPECT_EQ(ids, (std::vector<int64_t>{0, 1000, 1, 1001, 2, 1002, 2000, 3000, 2001, 3001, 2002,
                                       3002, 4000}));
  EXPECT_EQ(error.code(), StatusCode::kNotFound) << error.ToString();
  EXPECT_NE(error.message().find(g.paths[5]), std::string::npos) << error.ToString();
}

// Many shards of two records through 16 read-ahead slots (files opened and closed by the fill
// tasks): every record once, in the synchronous interleave's order, and a checkpoint taken at
// any of several points resumes exactly (slots reopen at their saved positions).
TEST(InterleaveReadAheadTest, ManyTinyShardsKeepOrderAndCheckpoints) {
  Files f = WriteFiles(std::vector<int>(40, 2));
  Dataset files = Ok(Dataset::FromFiles(f.paths));
  Dataset sync = Ok(files.Interleave({.cycle_length = 16, .block_length = 1, .num_parallel = 0}));
  Dataset ahead = Ok(files.Interleave({.cycle_length = 16, .block_length = 1, .num_parallel = 2}));
  const auto expected = Flat(RunAll(sync));
  auto sorted = expected;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, AllIds(f));
  EXPECT_EQ(Flat(RunAll(ahead)), expected);
  for (int k : {1, 15, 17, 33, 50, 79}) {
    auto it = Ok(ahead.MakeIterator());
    auto head = Flat(Drain(*it, k));
    const std::string state = Ok(it->Checkpoint());
    auto rest = Flat(Drain(*it));  // the checkpoint does not disturb the running iterator
    auto restored = Flat(Drain(*Ok(ahead.Restore(Bytes(state)))));
    EXPECT_EQ(rest, restored) << "checkpoint after " << k;
    head.insert(head.end(), rest.begin(), rest.end());
    EXPECT_EQ(head, expected) << "checkpoint after " << k;
  }
}

}  // namespace recordflow::pipeline
