// Fuzzes Dataset::Restore: checkpoint bytes are untrusted (they come back from disk). The first
// byte picks one of two pipelines over the same in-memory records (bit 0) and whether to re-seal
// the state (bit 1: its last 4 bytes are replaced by the valid CRC32C of the rest, so that the
// mutations reach the field checks behind the checksum instead of stopping at it); the rest is
// the state. A state that restores must also iterate to the end without crashing.
//
// Seeds: fuzz/make_checkpoint_seeds.py builds the same pipelines with rf.Dataset and saves
// real checkpoints taken at several points.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "recordflow/example/example.h"
#include "recordflow/format/crc32c.h"
#include "recordflow/format/record_format.h"
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
    return pipeline::Dataset::FromRecords(Records())
        .Shuffle({.buffer_size = 4, .seed = 1})
        ->Take(7);
  }();
  return which == 0 ? a : b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const pipeline::Dataset& ds = Pipeline(data[0] & 1);
  std::string state(reinterpret_cast<const char*>(data + 1), size - 1);
  if ((data[0] & 2) != 0 && state.size() >= 4) {
    const std::string_view body(state.data(), state.size() - 4);
    const uint32_t crc = format::MaskCrc(format::Crc32c(std::as_bytes(std::span(body))));
    for (int i = 0; i < 4; ++i) state[body.size() + i] = static_cast<char>(crc >> (8 * i));
  }
  auto it = ds.Restore(std::as_bytes(std::span(state)));
  if (!it.ok()) return 0;
  pipeline::Element e;
  for (int i = 0; i < 100; ++i) {
    Result<bool> got = (*it)->GetNext(&e);
    if (!got.ok() || !*got) break;
  }
  return 0;
}
