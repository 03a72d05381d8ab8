#include "recordflow/core/dtype.h"

#include <optional>
#include <string>

#include "recordflow/core/enum_names.h"

namespace recordflow {

namespace {

// ParseAnyDType reads the rows in order: the canonical names, then the aliases.
constexpr EnumName<DType> kDTypeNames[] = {
    {DType::kUint8, "uint8"},       {DType::kInt64, "int64"},     {DType::kFloat16, "float16"},
    {DType::kBFloat16, "bfloat16"}, {DType::kFloat32, "float32"}, {DType::kBytes, "bytes"},
    {DType::kFloat32, "float"},     {DType::kBytes, "string"},    {DType::kBytes, "str"},
};

}  // namespace

std::string_view DTypeName(DType dtype) { return NameOf(kDTypeNames, dtype, "?"); }

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
  if (std::optional<DType> dtype = FindByName(kDTypeNames, name)) return *dtype;
  return InvalidArgumentError("unknown dtype \"" + std::string(name) + "\": expected " +
                              NameList(kDTypeNames, ""));
}

}  // namespace recordflow
