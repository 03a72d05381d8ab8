// tf.train.Example and tf.train.SequenceExample: the protobuf wire format, decoded as views
// into the serialized bytes and encoded to the bytes TensorFlow's protobuf produces.
//
// Field numbers (tensorflow/core/example/{example,feature}.proto):
//   Example          { Features features = 1; }
//   SequenceExample  { Features context = 1; FeatureLists feature_lists = 2; }
//   Features         { map<string, Feature> feature = 1; }       (entry: key = 1, value = 2)
//   FeatureLists     { map<string, FeatureList> feature_list = 1; }
//   FeatureList      { repeated Feature feature = 1; }
//   Feature          { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
//                                   Int64List int64_list = 3; } }
//   BytesList        { repeated bytes value = 1; }
//   FloatList        { repeated float value = 1 [packed = true]; }
//   Int64List        { repeated int64 value = 1 [packed = true]; }
//
// Decoding follows protobuf's rules: packed and unpacked encodings of the numeric lists are both
// accepted (and may be mixed), unknown fields (groups included, up to 64 levels) are skipped,
// and for a key that appears twice the last entry wins. One deviation: a Feature whose list
// field appears twice keeps the last list (protobuf would concatenate two lists of the same
// kind; TensorFlow's parse_example keeps the first); TensorFlow never writes such a Feature.
// Malformed bytes (truncated varint, length past the end, wrong wire type for a known field,
// field number 0, an unterminated or too deep group) are kDataLoss, with the byte offset of the
// bad value; decoding never reads outside the given span.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "recordflow/core/dtype.h"
#include "recordflow/core/status.h"

namespace recordflow::example {

// The value type of a feature is core's DType (core/dtype.h), restricted to the three types a
// tf.train.Feature holds: kInt64, kFloat32, kBytes (its names "int64", "float32", "bytes").
using DType = recordflow::DType;
using recordflow::DTypeName;

// True for kInt64, kFloat32 and kBytes.
bool IsFeatureDType(DType dtype);
// Accepts "int64", "float32", "float", "bytes", "string", "str". Errors: kInvalidArgument (also
// for the tensor-only types such as "uint8").
Result<DType> ParseDType(std::string_view name);

// Which list a Feature holds. kNone is a Feature with no list set (an empty Feature message).
enum class ListKind : uint8_t { kNone = 0, kBytes = 1, kFloat = 2, kInt64 = 3 };

std::string_view ListKindName(ListKind kind);
// The ListKind that holds values of `dtype`.
ListKind ListKindFor(DType dtype);

// A Feature inside a serialized message: its kind and the bytes of its list message.
//
// Views: `list` points into the serialized record and lives as long as it.
struct FeatureView {
  ListKind kind = ListKind::kNone;
  std::span<const std::byte> list;
};

// Calls `fn(key, feature)` for every entry of a serialized Features message, in wire order
// (a repeated key is reported each time; callers keep the last). Errors: kDataLoss.
using FeatureCallback = std::function<void(std::string_view key, const FeatureView& feature)>;
Status ForEachFeature(std::span<const std::byte> features, const FeatureCallback& fn);

// The serialized Features message(s) of an Example: protobuf merges a repeated `features`
// field, so every occurrence is returned, in order. Errors: kDataLoss.
Status ExampleFeatures(std::span<const std::byte> example,
                       std::vector<std::span<const std::byte>>* features);

// Number of values in a list. Errors: kDataLoss for malformed lists.
Result<size_t> CountValues(const FeatureView& feature);

// Decode exactly `out.size()` values (callers count first, or know the count). A kNone feature
// holds no values. Errors: kDataLoss for malformed lists, kInternal if the count differs.
Status DecodeInt64s(const FeatureView& feature, std::span<int64_t> out);
Status DecodeFloats(const FeatureView& feature, std::span<float> out);
// Calls fn(value) for every bytes value. Errors: kDataLoss.
Status ForEachBytes(const FeatureView& feature,
                    const std::function<void(std::span<const std::byte>)>& fn);

// ---- owning representation, for building records and for Example.parse ----

// One feature's values; only the vector of `kind` is used.
struct Feature {
  ListKind kind = ListKind::kNone;
  std::vector<int64_t> int64s;
  std::vector<float> floats;
  std::vector<std::string> bytes;

  static Feature Int64s(std::vector<int64_t> v) { return {ListKind::kInt64, std::move(v), {}, {}}; }
  static Feature Floats(std::vector<float> v) { return {ListKind::kFloat, {}, std::move(v), {}}; }
  static Feature Bytes(std::vector<std::string> v) {
    return {ListKind::kBytes, {}, {}, std::move(v)};
  }
  size_t size() const;
  bool operator==(const Feature& other) const;
};

// Sorted by key, so encoding is deterministic.
using Features = std::map<std::string, Feature, std::less<>>;

struct SequenceExample {
  Features context;
  std::map<std::string, std::vector<Feature>, std::less<>> feature_lists;
};

// Serializes as TensorFlow's protobuf does with deterministic serialization (map entries in key
// order; packed numeric lists; empty lists kept as empty list messages).
std::string SerializeExample(const Features& features);
std::string SerializeSequenceExample(const SequenceExample& example);

// Decodes a whole record. Errors: kDataLoss for malformed bytes.
Result<Features> ParseExample(std::span<const std::byte> example);
Result<SequenceExample> ParseSequenceExample(std::span<const std::byte> example);

}  // namespace recordflow::example
