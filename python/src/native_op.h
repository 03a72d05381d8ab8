// A native map op made by a binding module (vision.cc) and consumed by Dataset.map
// (pipeline.cc).
#pragma once

#include "recordflow/pipeline/dataset.h"

namespace recordflow::python {

// The same concept as vision::VisionOp: a native map with how it may run.
using NativeMapOp = pipeline::MapOp;

}  // namespace recordflow::python
