// A C++ trainer's input loop on recordflow's pipeline (e.g. for LibTorch): shuffled, batched,
// parsed ImageNet-style Examples, with a checkpoint taken mid-epoch and restored.
//
//   train_loop FILE_OR_GLOB... [--batch N] [--epochs N]
//
// Prints one line per batch (first label and sizes), then the pipeline's stats report. After
// half of the first epoch it saves a checkpoint, restores a second iterator from it and checks
// that both produce the same remaining batches (exit status 1 if not).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "recordflow/pipeline/dataset.h"

namespace rf = recordflow;
namespace pl = recordflow::pipeline;

namespace {

int Fail(const rf::Status& s) {
  std::fprintf(stderr, "train_loop: %s\n", s.ToString().c_str());
  return 2;
}

// The labels of a batch: what this example compares between the two iterators.
std::vector<int64_t> Labels(const pl::Element& e) { return e.columns[0].int64s; }

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files;
  size_t batch = 4;
  int64_t epochs = 2;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--batch" && i + 1 < argc) {
      batch = std::strtoul(argv[++i], nullptr, 10);
    } else if (a == "--epochs" && i + 1 < argc) {
      epochs = std::strtoll(argv[++i], nullptr, 10);
    } else {
      files.push_back(a);
    }
  }
  if (files.empty() || batch == 0) {
    std::fprintf(stderr, "usage: train_loop FILE_OR_GLOB... [--batch N] [--epochs N]\n");
    return 2;
  }

  using rf::example::DType;
  using rf::example::FeatureSpec;
  // Defaults stand in for features a record lacks (-1: unlabeled).
  std::vector<FeatureSpec> spec = {
      FeatureSpec::FixedLen("image/class/label", DType::kInt64, {},
                            rf::example::Feature::Int64s({-1})),
      FeatureSpec::FixedLen("image/encoded", DType::kBytes, {}, rf::example::Feature::Bytes({""})),
      FeatureSpec::FixedLen("image/height", DType::kInt64, {}, rf::example::Feature::Int64s({0})),
      FeatureSpec::FixedLen("image/width", DType::kInt64, {}, rf::example::Feature::Int64s({0})),
  };

  // Each builder step can fail (bad arguments, no files): Result<Dataset>.
  pl::FilesOptions files_options;
  files_options.shuffle_files = true;
  files_options.seed = 1;
  auto ds = pl::Dataset::FromFiles(files, files_options);
  if (!ds.ok()) return Fail(ds.status());
  auto shuffled = ds->Shuffle({.buffer_size = 64, .seed = 2});
  if (!shuffled.ok()) return Fail(shuffled.status());
  auto batched = shuffled->Repeat(epochs).Batch(batch);
  if (!batched.ok()) return Fail(batched.status());
  auto parsed = batched->Parse(spec);
  if (!parsed.ok()) return Fail(parsed.status());
  auto pipeline = parsed->Prefetch(pl::kAutotune);
  if (!pipeline.ok()) return Fail(pipeline.status());
  std::printf("pipeline: %s\n", pipeline->DebugString().c_str());

  auto it = pipeline->MakeIterator();
  if (!it.ok()) return Fail(it.status());
  std::vector<std::vector<int64_t>> seen;
  pl::Element e;
  while (true) {
    rf::Result<bool> got = (*it)->GetNext(&e);
    if (!got.ok()) return Fail(got.status());
    if (!*got) break;
    const auto& image = e.columns[1];
    std::printf("batch %zu: %zu records, first label %lld, first image %lld bytes\n", seen.size(),
                e.num_records(), static_cast<long long>(e.columns[0].int64s[0]),
                static_cast<long long>(image.bytes_offsets[1] - image.bytes_offsets[0]));
    seen.push_back(Labels(e));
  }
  std::printf("%s", (*it)->stats().Report().c_str());

  // Checkpoint halfway through, restore, and compare the rest.
  const size_t half = seen.size() / 2;
  auto first = pipeline->MakeIterator();
  if (!first.ok()) return Fail(first.status());
  for (size_t i = 0; i < half; ++i) {
    rf::Result<bool> got = (*first)->GetNext(&e);
    if (!got.ok()) return Fail(got.status());
  }
  auto state = (*first)->Checkpoint();
  if (!state.ok()) return Fail(state.status());
  first->reset();  // stops and joins its threads
  auto restored = pipeline->Restore(std::as_bytes(std::span(state->data(), state->size())));
  if (!restored.ok()) return Fail(restored.status());
  size_t i = half;
  while (true) {
    rf::Result<bool> got = (*restored)->GetNext(&e);
    if (!got.ok()) return Fail(got.status());
    if (!*got) break;
    if (i >= seen.size() || Labels(e) != seen[i]) {
      std::fprintf(stderr, "train_loop: restored batch %zu differs\n", i);
      return 1;
    }
    ++i;
  }
  if (i != seen.size()) {
    std::fprintf(stderr, "train_loop: restored run ended after %zu of %zu batches\n", i,
                 seen.size());
    return 1;
  }
  std::printf(
      "checkpoint after %zu batches (%zu bytes) restored: the remaining %zu batches match\n", half,
      state->size(), seen.size() - half);
  return 0;
}
