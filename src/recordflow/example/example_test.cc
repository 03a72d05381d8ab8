#include "recordflow/example/example.h"

#include <cmath>
#include <limits>
#include <random>

#include <gtest/gtest.h>

namespace recordflow::example {
namespace {

std::span<const std::byte> B(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

Features Sample() {
  Features f;
  f["label"] = Feature::Int64s(
      {-1, 0, 5, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()});
  f["score"] = Feature::Floats({1.5f, -0.0f, std::numeric_limits<float>::infinity(),
                                std::numeric_limits<float>::quiet_NaN()});
  f["image/encoded"] = Feature::Bytes({std::string("\xff\xd8\x00jpeg", 7), ""});
  f["empty_ints"] = Feature::Int64s({});
  f["no_kind"] = Feature{};
  return f;
}

TEST(ExampleCodecTest, RoundTrip) {
  Features f = Sample();
  std::string bytes = SerializeExample(f);
  auto parsed = ParseExample(B(bytes));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(*parsed, f);
}

TEST(ExampleCodecTest, KnownBytesFromTensorFlow) {
  // tf.train.Example(features={"a": int64_list [-1, 5], "b": int64_list [], "": Feature()})
  // .SerializeToString(deterministic=True), recorded from TensorFlow 2.21 (keys re-sorted
  // into C++ protobuf's deterministic order: "", "a", "b").
  Features f;
  f[""] = Feature{};
  f["a"] = Feature::Int64s({-1, 5});
  f["b"] = Feature::Int64s({});
  std::string want = std::string("\n%", 2) + std::string("\n\x04\n\x00\x12\x00", 6) +
                     std::string(
                         "\n\x14\n\x01"
                         "a\x12\x0f\x1a\r\n\x0b\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x05",
                         22) +
                     std::string(
                         "\n\x07\n\x01"
                         "b\x12\x02\x1a\x00",
                         9);
  EXPECT_EQ(SerializeExample(f), want);
}

TEST(ExampleCodecTest, UnpackedNumericListsAndUnknownFieldsAccepted) {
  // Int64List with unpacked values (tag 0x08) mixed with a packed run, and a FloatList with an
  // unpacked value (tag 0x0d), plus unknown fields at every level.
  std::string int_list = std::string("\x08\x07", 2) + std::string("\x0a\x02\x01\x02", 4) +
                         std::string("\x10\x05", 2);  // unknown field 2 (varint)
  std::string float_list = std::string("\x0d\x00\x00\x80\x3f", 5);
  std::string feat_i = "\x1a" + std::string(1, static_cast<char>(int_list.size())) + int_list;
  std::string feat_f = "\x12" + std::string(1, static_cast<char>(float_list.size())) + float_list +
                       std::string("\x20\x01", 2);  // unknown field 4 in Feature
  auto entry = [](const std::string& key, const std::string& feat) {
    std::string e = "\x0a" + std::string(1, static_cast<char>(key.size())) + key + "\x12" +
                    std::string(1, static_cast<char>(feat.size())) + feat;
    return "\x0a" + std::string(1, static_cast<char>(e.size())) + e;
  };
  std::string features = entry("i", feat_i) + entry("f", feat_f);
  std::string example = "\x0a" + std::string(1, static_cast<char>(features.size())) + features +
                        std::string("\x18\x2a", 2);  // unknown field 3 in Example
  auto parsed = ParseExample(B(example));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ((*parsed)["i"].int64s, (std::vector<int64_t>{7, 1, 2}));
  EXPECT_EQ((*parsed)["f"].floats, (std::vector<float>{1.0f}));
}

TEST(ExampleCodecTest, RepeatedKeyLastWins) {
  std::string a = SerializeExample({{"k", Feature::Int64s({1})}});
  std::string b = SerializeExample({{"k", Feature::Int64s({2})}});
  // Two `features` fields: protobuf merges them; for the same key the last entry wins.
  auto parsed = ParseExample(B(a + b));
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ((*parsed)["k"].int64s, std::vector<int64_t>{2});
}

TEST(ExampleCodecTest, SequenceExampleRoundTrip) {
  SequenceExample se;
  se.context["id"] = Feature::Bytes({"clip-7"});
  se.feature_lists["frames"] = {Feature::Bytes({"f0"}), Feature::Bytes({"f1", "f1b"})};
  se.feature_lists["labels"] = {Feature::Int64s({1}), Feature::Int64s({}), Feature{}};
  std::string bytes = SerializeSequenceExample(se);
  auto parsed = ParseSequenceExample(B(bytes));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->context, se.context);
  EXPECT_EQ(parsed->feature_lists, se.feature_lists);
}

// Every truncation and every single-byte change of a valid record either parses or fails with
// kDataLoss; nothing crashes or reads out of bounds (ASan checks the latter).
TEST(ExampleCodecTest, DamagedBytesNeverCrash) {
  std::string bytes = SerializeExample(Sample());
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    auto r = ParseExample(B(bytes.substr(0, cut)));
    if (!r.ok()) EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << cut;
  }
  std::mt19937 rng(3);
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string d = bytes;
    d[i] = static_cast<char>(rng());
    auto r = ParseExample(B(d));
    if (!r.ok()) EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << i;
  }
}

TEST(ExampleCodecTest, MalformedInputsNameTheProblem) {
  struct Case {
    std::string bytes;
    const char* message;
  } cases[] = {
      {std::string("\x0a\x05\x0a", 3), "length past the end"},
      {std::string("\x0a\xff\xff", 3), "truncated varint"},
      {std::string("\x08\x01", 2), "wrong wire type"},
      {std::string("\x0a\x03\x0a\x01\x0b", 5), ""},   // entry that is itself malformed
      {std::string(70, '\x13'), "nesting too deep"},  // deep groups in unknown field 2
      {std::string("\x17", 1), "invalid wire type"},
  };
  for (const auto& c : cases) {
    auto r = ParseExample(B(c.bytes));
    ASSERT_FALSE(r.ok()) << c.message;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(r.status().message().find(c.message), std::string::npos) << r.status().message();
  }
}

TEST(ExampleCodecTest, DTypeNames) {
  EXPECT_EQ(*ParseDType("float"), DType::kFloat32);
  EXPECT_EQ(*ParseDType("string"), DType::kBytes);
  EXPECT_FALSE(ParseDType("float64").ok());
  EXPECT_EQ(DTypeName(DType::kInt64), "int64");
}

}  // namespace
}  // namespace recordflow::example
