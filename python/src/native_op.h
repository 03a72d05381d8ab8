// A native map op made by a binding module (vision.cc) and consumed by Dataset.map
// (pipeline.cc).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "recordflow/pipeline/dataset.h"

namespace recordflow::python {

struct NativeMapOp {
  pipeline::MapFn fn;
  std::string name;
  std::shared_ptr<std::atomic<uint64_t>> skipped;  // may be null
  bool splits_batches = false;  // see Dataset::Map
  bool elementwise = false;     // see pipeline::MapOptions
};

}  // namespace recordflow::python
