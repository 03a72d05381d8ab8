#include "recordflow/core/dtype.h"

#include <gtest/gtest.h>

#include "recordflow/example/example.h"
#include "recordflow/image/ops.h"
#include "recordflow/pipeline/dataset.h"

namespace recordflow {
namespace {

constexpr DType kAll[] = {DType::kUint8,    DType::kInt64,   DType::kFloat16,
                          DType::kBFloat16, DType::kFloat32, DType::kBytes};

TEST(DTypeTest, NamesRoundTripAndSizesAreNumPys) {
  for (DType t : kAll) {
    Result<DType> parsed = ParseAnyDType(DTypeName(t));
    ASSERT_TRUE(parsed.ok()) << DTypeName(t);
    EXPECT_EQ(*parsed, t);
  }
  EXPECT_EQ(DTypeSize(DType::kUint8), 1u);
  EXPECT_EQ(DTypeSize(DType::kInt64), 8u);
  EXPECT_EQ(DTypeSize(DType::kFloat16), 2u);
  EXPECT_EQ(DTypeSize(DType::kBFloat16), 2u);
  EXPECT_EQ(DTypeSize(DType::kFloat32), 4u);
  EXPECT_EQ(DTypeSize(DType::kBytes), 0u);
  EXPECT_EQ(*ParseAnyDType("float"), DType::kFloat32);
  EXPECT_EQ(*ParseAnyDType("string"), DType::kBytes);
  Result<DType> bad = ParseAnyDType("complex64");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("complex64"), std::string::npos);
}

// The example, image and pipeline layers name one enum, and each parser keeps to its subset.
TEST(DTypeTest, LayersShareTheEnumAndParseTheirSubset) {
  static_assert(std::is_same_v<example::DType, DType>);
  static_assert(std::is_same_v<image::TensorType, DType>);
  static_assert(std::is_same_v<pipeline::Tensor::DType, DType>);
  EXPECT_TRUE(example::ParseDType("bytes").ok());
  EXPECT_TRUE(example::ParseDType("float").ok());
  EXPECT_FALSE(example::ParseDType("uint8").ok());
  EXPECT_FALSE(example::ParseDType("bfloat16").ok());
  EXPECT_TRUE(image::ParseTensorType("bfloat16").ok());
  EXPECT_FALSE(image::ParseTensorType("int64").ok());
  EXPECT_FALSE(image::ParseTensorType("bytes").ok());
  EXPECT_FALSE(image::ParseTensorType("float").ok());
  EXPECT_EQ(example::ListKindFor(DType::kUint8), example::ListKind::kNone);
  EXPECT_EQ(example::ListKindFor(DType::kInt64), example::ListKind::kInt64);
}

}  // namespace
}  // namespace recordflow
