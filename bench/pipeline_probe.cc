// The suite's recordflow train or eval pipeline in C++ (no Python): for A/B between two builds'
// static libraries, and for `perf record` of the engine alone.
//
// Build against a release tree (cmake --build --preset release):
//   B=build/release
//   g++ -O2 -std=c++20 -Iinclude -I$B/generated bench/pipeline_probe.cc \
//     -Wl,--start-group $B/librecordflow_*.a -Wl,--end-group \
//     -ljpeg -lpng -lz -lisal -lcurl -lssl -lcrypto -lgif -lwebp -lwebpdemux -lpthread \
//     -o /tmp/pipeline_probe
//   /tmp/pipeline_probe eval 8 bench/data/suite-10x300/shards/*.tfrecord
//   WARMUP=10 /tmp/pipeline_probe eval 8 ...   # more unmeasured batches first (default 2)
//
// Pipelines (bench/suite_worker.py's recordflow configuration): train = files shuffled,
// interleave, shuffle(2048), repeat, batch(256), imagenet_train(224), prefetch; eval = files in
// order, repeat, batch(256), imagenet_eval(224, 256), prefetch. Prints images/s and process
// CPU-ms per image over BATCHES batches after the first and WARMUP more.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "recordflow/pipeline/dataset.h"
#include "recordflow/vision/vision.h"

namespace rf = recordflow;
namespace pl = recordflow::pipeline;

namespace {

double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

rf::Result<pl::Dataset> Pipeline(const std::string& preset, const std::vector<std::string>& files) {
  const bool train = preset == "train";
  pl::FilesOptions fo;
  fo.shuffle_files = train;
  fo.seed = 0;
  RF_ASSIGN_OR_RETURN(pl::Dataset d, pl::Dataset::FromFiles(files, fo));
  if (train) {
    RF_ASSIGN_OR_RETURN(d, d.Interleave({}));
    RF_ASSIGN_OR_RETURN(d, d.Shuffle({.buffer_size = 2048, .seed = 0}));
  }
  RF_ASSIGN_OR_RETURN(d, d.Repeat(-1).Batch(256, /*drop_remainder=*/true));
  RF_ASSIGN_OR_RETURN(rf::vision::VisionOp op,
                      train ? rf::vision::ImagenetTrain({}) : rf::vision::ImagenetEval({}));
  RF_ASSIGN_OR_RETURN(d, d.Map(op));
  return d.Prefetch(pl::kAutotune);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || (std::string(argv[1]) != "train" && std::string(argv[1]) != "eval")) {
    std::fprintf(stderr, "usage: %s train|eval BATCHES FILE...\n", argv[0]);
    return 2;
  }
  const std::string preset = argv[1];
  const int batches = std::max(1, std::atoi(argv[2]));
  const int warmup = std::getenv("WARMUP") != nullptr ? std::atoi(std::getenv("WARMUP")) : 2;
  const std::vector<std::string> files(argv + 3, argv + argc);
  rf::Result<pl::Dataset> d = Pipeline(preset, files);
  if (!d.ok()) {
    std::fprintf(stderr, "%s\n", d.status().ToString().c_str());
    return 2;
  }
  auto it = d->MakeIterator();
  if (!it.ok()) {
    std::fprintf(stderr, "%s\n", it.status().ToString().c_str());
    return 2;
  }
  pl::Element e;
  double cpu0 = 0;
  std::chrono::steady_clock::time_point t0;
  for (int i = 0; i < 1 + warmup + batches; ++i) {
    if (i == 1 + warmup) {
      cpu0 = ProcessCpuSeconds();
      t0 = std::chrono::steady_clock::now();
    }
    rf::Result<bool> got = (*it)->GetNext(&e);
    if (!got.ok() || !*got) {
      std::fprintf(stderr, "the pipeline stopped: %s\n",
                   got.ok() ? "end of data" : got.status().ToString().c_str());
      return 1;
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double images = 256.0 * batches;
  std::printf("%s: %.1f images/s, %.3f CPU-ms per image over %d batches after %d\n", preset.c_str(),
              images / wall, (ProcessCpuSeconds() - cpu0) * 1e3 / images, batches, 1 + warmup);
  return 0;
}
