// Fuzzes Dataset::Restore: checkpoint bytes are untrusted (they come back from disk). The first
// byte picks one of two pipelines over the same in-memory records; the rest is the state. A
// state that restores must also iterate to the end without crashing.
//
// Seeds: fuzz/make_checkpoint_seeds.py builds the same pipelines with rf.Dataset and saves
// real checkpoints taken at several points.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "recordflow/example/example.h"
#include "recordflow/pipeline/dataset.h"

using namespace recordflow;

namespace {

std::vector<std::string> Records() {
  std::vector<std::string> out;
  for (int i = 0; i < 10; ++i) {
    example::Features f;
    f["id"] = example::Feature::Int64s({i});
    out.push_back(example::SerializeExample(f));
  }
  return out;
}

const pipeline::Dataset& Pipeline(int which) {
  static const pipeline::Dataset a = [] {
    auto base = pipeline::Dataset::FromRecords(Records()).Shuffle({.buffer_size = 4, .seed = 1});
    auto batched = base->Repeat(2).Batch(3);
    return batched->Parse({example::FeatureSpec::FixedLen("id", example::DType::kInt64)}).value();
  }();
  static const pipeline::Dataset b = [] {
    return pipeline::Dataset::FromRecords(Records()).Shuffle({.buffer_size = 4, .seed = 1})->Take(7);
  }();
  return which == 0 ? a : b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const pipeline::Dataset& ds = Pipeline(data[0] & 1);
  auto it = ds.Restore(std::span(reinterpret_cast<const std::byte*>(data + 1), size - 1));
  if (!it.ok()) return 0;
  pipeline::Element e;
  for (int i = 0; i < 100; ++i) {
    Result<bool> got = (*it)->GetNext(&e);
    if (!got.ok() || !*got) break;
  }
  return 0;
}
