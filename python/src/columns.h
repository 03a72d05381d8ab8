// Parsed columns -> Python objects, shared by the example and pipeline bindings (example.cc).
#pragma once

#include <nanobind/nanobind.h>

#include <span>
#include <vector>

#include "recordflow/example/parse.h"

namespace recordflow::python {

// A Column as NumPy (zero-copy for numeric values; bytes as an object array of bytes, or of
// memoryviews into `records` when given); ragged columns as (values, row_splits) tuples.
// With bytes_as_arrow, bytes values are an (offsets, data) pair: an Arrow binary array's buffers.
nanobind::object ColumnToPython(example::Column&& c, const nanobind::list* records = nullptr,
                                const std::vector<std::span<const std::byte>>* spans = nullptr,
                                bool bytes_as_arrow = false);

// Python spec tuples (key, "fixed"/"var", dtype, shape, default) -> FeatureSpecs.
std::vector<example::FeatureSpec> ToSpecs(nanobind::list specs);

}  // namespace recordflow::python
