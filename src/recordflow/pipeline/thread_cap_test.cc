// IteratorOptions::max_threads / max_cpu_fraction: the iterator's work (maps, ParallelFor
// inside them, read-ahead) stays within the cap, measured by concurrent callers and by the
// process's CPU time over wall time.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "recordflow/core/thread_pool.h"
#include "recordflow/example/example.h"
#include "recordflow/format/record_test_util.h"
#include "recordflow/format/record_writer.h"
#include "recordflow/pipeline/dataset.h"

namespace recordflow::pipeline {
namespace {

using format::testing::Bytes;
using format::testing::MakeTempDir;

std::vector<std::string> WriteShards(int shards, int records) {
  const std::string dir = MakeTempDir();
  std::vector<std::string> paths;
  for (int s = 0; s < shards; ++s) {
    const std::string path = dir + "/cap-" + std::to_string(s) + ".tfrecord";
    auto w = format::RecordWriter::Open(path, {});
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    for (int j = 0; j < records; ++j) {
      example::Features f;
      f["id"] = example::Feature::Int64s({s * 1000 + j});
      EXPECT_TRUE((*w)->WriteRecord(Bytes(example::SerializeExample(f))).ok());
    }
    EXPECT_TRUE((*w)->Close().ok());
    paths.push_back(path);
  }
  return paths;
}

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// Work that only burns CPU (about a millisecond), so that a cap shows in CPU time.
uint64_t Burn(uint64_t seed) {
  uint64_t x = seed | 1;
  for (int i = 0; i < 300000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}

struct Concurrency {
  std::atomic<int> now{0};
  std::atomic<int> peak{0};
  std::atomic<int> max_context_threads{0};
  std::atomic<uint64_t> sink{0};
  void Enter() {
    const int n = now.fetch_add(1) + 1;
    int p = peak.load();
    while (n > p && !peak.compare_exchange_weak(p, n)) {
    }
  }
  void Leave() { now.fetch_sub(1); }
};

struct CapRun {
  int peak = 0;
  int context_threads = 0;
  double cores = 0;  // process CPU seconds per wall second while iterating
  size_t records = 0;
};

// A CPU-bound native map that also spreads part of its work with ParallelFor (as the vision
// presets do), over a 4-file interleave.
CapRun RunCpuBoundMap(IteratorOptions options) {
  static const std::vector<std::string> paths = WriteShards(4, 50);
  auto c = std::make_shared<Concurrency>();
  auto files = Dataset::FromFiles(paths);
  EXPECT_TRUE(files.ok());
  auto ds = files->Interleave({})->Map(
      [c](Element& e, const MapContext& ctx) {
        int t = c->max_context_threads.load();
        while (ctx.threads > t && !c->max_context_threads.compare_exchange_weak(t, ctx.threads)) {
        }
        c->Enter();
        uint64_t acc = Burn(e.records.size());
        c->Leave();
        ParallelFor(4, 1, 0, [&](size_t begin, size_t end) {
          c->Enter();
          uint64_t local = 0;
          for (size_t i = begin; i < end; ++i) local += Burn(i);
          c->sink.fetch_add(local);
          c->Leave();
        });
        c->sink.fetch_add(acc);
        return Status();
      },
      "burn");
  EXPECT_TRUE(ds.ok()) << ds.status().ToString();
  CapRun run;
  const double cpu0 = CpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  {
    auto it = ds->MakeIterator(options);
    EXPECT_TRUE(it.ok()) << it.status().ToString();
    if (!it.ok()) return run;
    Element e;
    while (true) {
      Result<bool> got = (*it)->GetNext(&e);
      EXPECT_TRUE(got.ok()) << got.status().ToString();
      if (!got.ok() || !*got) break;
      run.records += e.num_records();
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  run.cores = (CpuSeconds() - cpu0) / wall;
  run.peak = c->peak.load();
  run.context_threads = c->max_context_threads.load();
  return run;
}

TEST(ThreadCapTest, MaxThreadsOneKeepsTheWorkOnOneCore) {
  IteratorOptions o;
  o.max_threads = 1;
  const CapRun capped = RunCpuBoundMap(o);
  EXPECT_EQ(capped.records, 200u);
  EXPECT_EQ(capped.peak, 1) << "map calls and their ParallelFor chunks ran at once";
  EXPECT_EQ(capped.context_threads, 1);
  EXPECT_LE(capped.cores, 1.1) << "CPU seconds per wall second with max_threads = 1";
  std::printf("max_threads=1: %.2f cores (process CPU s / wall s)\n", capped.cores);
}

TEST(ThreadCapTest, UncappedUsesEveryPoolThread) {
  // The measurement can see more than one thread: without a cap the same map runs on all.
  const CapRun uncapped = RunCpuBoundMap({});
  EXPECT_EQ(uncapped.records, 200u);
  EXPECT_GE(uncapped.peak, std::min(2, ThreadPool::Default().num_threads()));
}

TEST(ThreadCapTest, CpuFractionRoundsDownToAtLeastOneThread) {
  IteratorOptions o;
  EXPECT_EQ(EffectiveThreads(o, 8), 8);
  o.max_cpu_fraction = 0.4;
  EXPECT_EQ(EffectiveThreads(o, 8), 3);
  EXPECT_EQ(EffectiveThreads(o, 10), 4);
  EXPECT_EQ(EffectiveThreads(o, 2), 1);
  o.max_threads = 2;
  EXPECT_EQ(EffectiveThreads(o, 10), 2);
  o.max_cpu_fraction = 1.0;
  o.max_threads = 0;
  EXPECT_EQ(EffectiveThreads(o, 6), 6);
  o.max_threads = 64;
  EXPECT_EQ(EffectiveThreads(o, 6), 6);
}

TEST(ThreadCapTest, CpuFractionCapsTheMap) {
  IteratorOptions o;
  o.max_cpu_fraction = 0.01;  // below one core: one thread
  const CapRun capped = RunCpuBoundMap(o);
  EXPECT_EQ(capped.records, 200u);
  EXPECT_EQ(capped.peak, 1);
}

TEST(ThreadCapTest, BadCapsAreInvalidArgument) {
  auto ds = Dataset::FromFiles(WriteShards(1, 1));
  ASSERT_TRUE(ds.ok());
  IteratorOptions o;
  o.max_threads = -1;
  EXPECT_EQ(ds->MakeIterator(o).status().code(), StatusCode::kInvalidArgument);
  o.max_threads = 0;
  o.max_cpu_fraction = 1.5;
  EXPECT_EQ(ds->MakeIterator(o).status().code(), StatusCode::kInvalidArgument);
  o.max_cpu_fraction = std::nan("");
  EXPECT_EQ(ds->MakeIterator(o).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ds->Restore({}, o).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace recordflow::pipeline
