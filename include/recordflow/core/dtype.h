// The one element-type enum of recordflow: feature values (example layer), image tensors (image
// and vision layers) and the pipeline's dense tensors all name their type with DType. Each layer
// accepts the subset it can hold and says so in its own parser (example::ParseDType takes the
// three feature types, image::ParseTensorType the four tensor types).
//
// Thread safety: pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "recordflow/core/status.h"

namespace recordflow {

enum class DType : uint8_t { kUint8, kInt64, kFloat16, kBFloat16, kFloat32, kBytes };

// NumPy's names: "uint8", "int64", "float16", "bfloat16", "float32"; "bytes" for kBytes.
std::string_view DTypeName(DType dtype);

// Bytes per value: 1, 8, 2, 2, 4; 0 for kBytes (variable length).
size_t DTypeSize(DType dtype);

// Any of DTypeName's names, plus the aliases TensorFlow and NumPy users write: "float" for
// float32, "string" / "str" for bytes. Errors: kInvalidArgument naming the text.
Result<DType> ParseAnyDType(std::string_view name);

}  // namespace recordflow
