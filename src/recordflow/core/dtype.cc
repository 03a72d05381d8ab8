#include "recordflow/core/dtype.h"

#include <string>

namespace recordflow {

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kUint8:
      return "uint8";
    case DType::kInt64:
      return "int64";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat32:
      return "float32";
    case DType::kBytes:
      return "bytes";
  }
  return "?";
}

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kUint8:
      return 1;
    case DType::kInt64:
      return 8;
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kFloat32:
      return 4;
    case DType::kBytes:
      return 0;
  }
  return 0;
}

Result<DType> ParseAnyDType(std::string_view name) {
  for (DType t : {DType::kUint8, DType::kInt64, DType::kFloat16, DType::kBFloat16, DType::kFloat32,
                  DType::kBytes}) {
    if (name == DTypeName(t)) return t;
  }
  if (name == "float") return DType::kFloat32;
  if (name == "string" || name == "str") return DType::kBytes;
  return InvalidArgumentError("unknown dtype \"" + std::string(name) +
                              "\": expected uint8, int64, float16, bfloat16, float32 or bytes");
}

}  // namespace recordflow
