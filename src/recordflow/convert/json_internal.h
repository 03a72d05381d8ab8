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

#include "recordflow/convert/convert.h"
#include "recordflow/core/json.h"
#include "recordflow/core/status.h"

namespace recordflow::convert::internal {

// The reader is core's (core/json.h).
using ::recordflow::JsonValue;
using ::recordflow::ParseJson;

// One shard's entry in convert's summary.json and in reshard's summary: Python's cardinality
// (recordflow/_cardinality.py) reads "file", "records" and "bytes" back from it.
std::string ShardJson(std::string_view file, uint64_t records, uint64_t bytes, bool resumed);

// The "skipped" array of the convert, reshard and extract summaries: one object per input, its
// path under `path_key` ("path" for files, "record" for extract's records) and its "reason".
std::string SkippedJson(const std::vector<SkippedInput>& skipped, std::string_view path_key);

}  // namespace recordflow::convert::internal
