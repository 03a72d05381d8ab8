// Adversarial Example bytes: nesting far deeper than any real message, and huge repeated
// fields. Each gets a clear kDataLoss / kInvalidArgument naming the record and key, or parses
// correctly, and never recurses or allocates by what a length field claims.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "recordflow/example/example.h"
#include "recordflow/example/parse.h"
#include "recordflow/example/wire_test_util.h"

namespace recordflow::example {
namespace {

std::span<const std::byte> B(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

using testing::Varint;

// A length-delimited field `field` holding `body`.
std::string Field(int field, const std::string& body) {
  return testing::LengthDelimited(static_cast<uint64_t>(field), body);
}

TEST(AdversarialExampleTest, MillionDeepGroupsFailWithoutRecursingThatDeep) {
  // Start-group tags of unknown field 2, a million deep (a stack overflow if the skipper
  // recursed per level): the depth limit stops it.
  const std::string deep(1'000'000, '\x13');
  auto r = ParseExample(B(deep));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(r.status().message(), "nesting too deep")) << r.status().message();

  // The same inside a valid Example's Features, and through the batch parser, which names the
  // record.
  const std::string good = SerializeExample({{"k", Feature::Int64s({7})}});
  const std::string bad = good + deep;
  auto parser = ExampleParser::Create({FeatureSpec::VarLen("k", DType::kInt64)});
  ASSERT_TRUE(parser.ok());
  std::vector<std::string> records = {good, good, bad};
  std::vector<std::span<const std::byte>> spans;
  for (const auto& s : records) spans.push_back(B(s));
  std::vector<Column> columns;
  Status s = parser->Parse(spans, &columns);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "record 2")) << s.message();

  auto seq = ParseSequenceExample(B(deep));
  EXPECT_EQ(seq.status().code(), StatusCode::kDataLoss);
}

TEST(AdversarialExampleTest, DeeplyNestedLengthDelimitedUnknownFieldsAreSkippedFlat) {
  // Submessages nested 20k deep inside an unknown field: skipped as one length-delimited blob
  // (no recursion), so the known feature still parses.
  std::string nested;
  for (int i = 0; i < 20000; ++i) nested = Field(1, nested);
  const std::string record = SerializeExample({{"k", Feature::Int64s({42})}}) + Field(9, nested);
  auto r = ParseExample(B(record));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->at("k").int64s, std::vector<int64_t>{42});
}

TEST(AdversarialExampleTest, HugeRepeatedValuesParseExactlyOrNameTheKey) {
  constexpr int64_t kValues = 4'000'000;
  std::vector<int64_t> values(kValues);
  for (int64_t i = 0; i < kValues; ++i) values[i] = i * 3 - 7;
  const std::string record = SerializeExample({{"big", Feature::Int64s(values)}});
  ASSERT_GT(record.size(), size_t{8} << 20);

  auto varlen = ExampleParser::Create({FeatureSpec::VarLen("big", DType::kInt64)});
  std::vector<std::span<const std::byte>> spans = {B(record)};
  std::vector<Column> columns;
  ASSERT_TRUE(varlen->Parse(spans, &columns).ok());
  ASSERT_EQ(columns[0].int64s.size(), static_cast<size_t>(kValues));
  EXPECT_EQ(columns[0].int64s.back(), (kValues - 1) * 3 - 7);
  EXPECT_EQ(columns[0].row_splits, (std::vector<int64_t>{0, kValues}));

  auto fixed = ExampleParser::Create({FeatureSpec::FixedLen("big", DType::kInt64, {2})});
  Status s = fixed->Parse(spans, &columns);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(s.message(), "feature 'big' of record 0")) << s.message();
  EXPECT_TRUE(Contains(s.message(), "has 4000000 values")) << s.message();
}

TEST(AdversarialExampleTest, HundredThousandRepeatedEntriesOfOneKeyKeepTheLast) {
  // The map entry for "k" repeated 100k times (protobuf semantics: the last wins), plus 100k
  // distinct keys: both parse, in time linear in the input.
  std::string features;
  for (int i = 0; i < 100'000; ++i) {
    const std::string list = Field(3, Field(1, Varint(static_cast<uint64_t>(i))));  // Int64List
    features += Field(1, Field(1, "k") + Field(2, list));
    features += Field(1, Field(1, "key" + std::to_string(i)) + Field(2, list));
  }
  const std::string record = Field(1, features);
  auto r = ParseExample(B(record));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->size(), 100'001u);
  EXPECT_EQ(r->at("k").int64s, std::vector<int64_t>{99'999});

  auto parser = ExampleParser::Create({FeatureSpec::FixedLen("k", DType::kInt64)});
  std::vector<std::span<const std::byte>> spans = {B(record)};
  std::vector<Column> columns;
  ASSERT_TRUE(parser->Parse(spans, &columns).ok());
  EXPECT_EQ(columns[0].int64s, std::vector<int64_t>{99'999});
}

TEST(AdversarialExampleTest, LengthFieldsNearTwoToThe64AreDataLossNotAllocations) {
  for (uint64_t claimed : {uint64_t{1} << 40, (uint64_t{1} << 63) - 1, ~uint64_t{0}}) {
    // Features message, a packed Int64List and a bytes value each claiming `claimed` bytes.
    const std::string header_only = Varint(1 << 3 | 2) + Varint(claimed) + "abc";
    auto r = ParseExample(B(header_only));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << claimed;
    EXPECT_TRUE(Contains(r.status().message(), "length past the end") ||
                Contains(r.status().message(), "varint"))
        << r.status().message();

    const std::string packed = Varint(1 << 3 | 2) + Varint(claimed) + "\x01\x02";
    const std::string record = Field(1, Field(1, Field(1, "k") + Field(2, Field(3, packed))));
    auto parser = ExampleParser::Create({FeatureSpec::VarLen("k", DType::kInt64)});
    std::vector<std::span<const std::byte>> spans = {B(record)};
    std::vector<Column> columns;
    Status s = parser->Parse(spans, &columns);
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << claimed << " " << s.ToString();
  }
}

}  // namespace
}  // namespace recordflow::example
