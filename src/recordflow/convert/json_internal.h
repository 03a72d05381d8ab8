// The convert layer's JSON helpers: its files (plan, shard state, summary) and JSONL manifests
// are read and written by recordflow/core/json.h.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "recordflow/core/json.h"
#include "recordflow/core/status.h"

namespace recordflow::convert::internal {

// The reader is core's (core/json.h).
using ::recordflow::JsonValue;
using ::recordflow::ParseJson;

// One shard's entry in convert's summary.json and in reshard's summary: Python's cardinality
// (recordflow/_cardinality.py) reads "file", "records" and "bytes" back from it.
std::string ShardJson(std::string_view file, uint64_t records, uint64_t bytes, bool resumed);

}  // namespace recordflow::convert::internal
