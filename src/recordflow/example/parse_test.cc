#include "recordflow/example/parse.h"
#include "recordflow/example/parse_test_util.h"

#include <random>

#include <gtest/gtest.h>

namespace recordflow::example {
namespace {

using testing::Spans;
using testing::Str;

std::vector<std::string> Batch(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    Features f;
    f["label"] = Feature::Int64s({i});
    f["xy"] = Feature::Floats({static_cast<float>(i), static_cast<float>(-i)});
    f["name"] = Feature::Bytes({"rec" + std::to_string(i)});
    std::vector<int64_t> tags(i % 4);
    for (int t = 0; t < i % 4; ++t) tags[t] = i * 10 + t;
    f["tags"] = Feature::Int64s(tags);
    std::vector<std::string> words(i % 3, "w" + std::to_string(i));
    f["words"] = Feature::Bytes(words);
    if (i % 2 == 0) f["maybe"] = Feature::Floats({0.5f});
    out.push_back(SerializeExample(f));
  }
  return out;
}

std::vector<FeatureSpec> Specs() {
  return {FeatureSpec::FixedLen("label", DType::kInt64),
          FeatureSpec::FixedLen("xy", DType::kFloat32, {2}),
          FeatureSpec::FixedLen("name", DType::kBytes),
          FeatureSpec::VarLen("tags", DType::kInt64),
          FeatureSpec::VarLen("words", DType::kBytes),
          FeatureSpec::FixedLen("maybe", DType::kFloat32, {}, Feature::Floats({-1.0f})),
          FeatureSpec::FixedLen("absent", DType::kBytes, {2}, Feature::Bytes({"d0", "d1"})),
          FeatureSpec::VarLen("never", DType::kFloat32)};
}

void CheckBatch(const std::vector<Column>& c, int n) {
  ASSERT_EQ(c.size(), 8u);
  EXPECT_EQ(c[0].shape, (std::vector<int64_t>{n}));
  EXPECT_EQ(c[1].shape, (std::vector<int64_t>{n, 2}));
  EXPECT_EQ(c[6].shape, (std::vector<int64_t>{n, 2}));
  EXPECT_TRUE(c[3].ragged);
  EXPECT_EQ(c[7].row_splits, std::vector<int64_t>(n + 1, 0));
  size_t tag_pos = 0;
  size_t word_pos = 0;
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(c[0].int64s[i], i);
    ASSERT_EQ(c[1].floats[2 * i], static_cast<float>(i));
    ASSERT_EQ(c[1].floats[2 * i + 1], static_cast<float>(-i));
    ASSERT_EQ(Str(c[2], i), "rec" + std::to_string(i));
    ASSERT_EQ(c[3].row_splits[i], static_cast<int64_t>(tag_pos));
    for (int t = 0; t < i % 4; ++t) ASSERT_EQ(c[3].int64s[tag_pos++], i * 10 + t);
    ASSERT_EQ(c[4].row_splits[i], static_cast<int64_t>(word_pos));
    for (int w = 0; w < i % 3; ++w) ASSERT_EQ(Str(c[4], word_pos++), "w" + std::to_string(i));
    ASSERT_EQ(c[5].floats[i], i % 2 == 0 ? 0.5f : -1.0f);
    ASSERT_EQ(Str(c[6], 2 * i), "d0");
    ASSERT_EQ(Str(c[6], 2 * i + 1), "d1");
  }
  EXPECT_EQ(c[3].row_splits[n], static_cast<int64_t>(tag_pos));
  EXPECT_EQ(c[4].row_splits[n], static_cast<int64_t>(word_pos));
}

TEST(ExampleParserTest, ParsesEverySpecKind) {
  auto parser = ExampleParser::Create(Specs());
  ASSERT_TRUE(parser.ok()) << parser.status().ToString();
  for (int n : {0, 1, 7, 300, 2000}) {
    auto records = Batch(n);
    std::vector<Column> columns;
    ParseOptions serial;
    serial.max_parallelism = 1;
    ASSERT_TRUE(parser->Parse(Spans(records), &columns, serial).ok());
    CheckBatch(columns, n);
    // Parallel parsing gives the same columns.
    ParseOptions parallel;
    parallel.min_records_per_thread = 16;
    parallel.max_parallelism = 4;
    std::vector<Column> columns2;
    ASSERT_TRUE(parser->Parse(Spans(records), &columns2, parallel).ok());
    CheckBatch(columns2, n);
  }
}

TEST(ExampleParserTest, BytesAsViewsMatchCopies) {
  auto parser = ExampleParser::Create(Specs());
  auto records = Batch(500);
  std::vector<Column> copied, viewed;
  ASSERT_TRUE(parser->Parse(Spans(records), &copied).ok());
  ParseOptions options;
  options.bytes_as_views = true;
  options.min_records_per_thread = 8;
  ASSERT_TRUE(parser->Parse(Spans(records), &viewed, options).ok());
  for (size_t k : {2, 4, 6}) {  // name, words, absent (a default)
    ASSERT_EQ(viewed[k].num_values(), copied[k].num_values());
    EXPECT_TRUE(viewed[k].bytes_data.empty());
    for (int64_t j = 0; j < copied[k].num_values(); ++j) {
      auto v = viewed[k].bytes_views[j];
      ASSERT_EQ(std::string(reinterpret_cast<const char*>(v.data()), v.size()), Str(copied[k], j));
    }
    EXPECT_EQ(viewed[k].row_splits, copied[k].row_splits);
  }
}

TEST(ExampleParserTest, UnpackedAndSplitNumericListsTakeTheGeneralPath) {
  // Int64List {value: 1 (unpacked), value: [2, 3] (packed)} and FloatList as two packed runs.
  std::string ints = std::string("\x08\x01", 2) + std::string("\x0a\x02\x02\x03", 4);
  std::string floats =
      std::string("\x0a\x04\x00\x00\x80\x3f", 6) + std::string("\x0a\x04\x00\x00\x00\x40", 6);
  auto feature = [](char kind, const std::string& list) {
    return std::string(1, kind) + std::string(1, static_cast<char>(list.size())) + list;
  };
  auto entry = [](const std::string& key, const std::string& feat) {
    std::string e = "\x0a" + std::string(1, static_cast<char>(key.size())) + key + "\x12" +
                    std::string(1, static_cast<char>(feat.size())) + feat;
    return "\x0a" + std::string(1, static_cast<char>(e.size())) + e;
  };
  std::string features = entry("i", feature('\x1a', ints)) + entry("f", feature('\x12', floats));
  std::vector<std::string> records = {"\x0a" + std::string(1, static_cast<char>(features.size())) +
                                      features};
  auto parser = ExampleParser::Create({FeatureSpec::FixedLen("i", DType::kInt64, {3}),
                                       FeatureSpec::FixedLen("f", DType::kFloat32, {2})});
  std::vector<Column> c;
  ASSERT_TRUE(parser->Parse(Spans(records), &c).ok());
  EXPECT_EQ(c[0].int64s, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(c[1].floats, (std::vector<float>{1.0f, 2.0f}));
  // A packed run longer than the shape is an error, not an overflow of the output.
  auto short_parser = ExampleParser::Create({FeatureSpec::FixedLen("i", DType::kInt64, {1})});
  EXPECT_EQ(short_parser->Parse(Spans(records), &c).code(), StatusCode::kInvalidArgument);
}

TEST(ExampleParserTest, ErrorsNameKeyAndRecord) {
  auto records = Batch(500);
  Features bad;
  bad["label"] = Feature::Floats({1.0f});  // wrong type
  records[321] = SerializeExample(bad);
  records[400] = "garbage that is not an Example";
  auto parser = ExampleParser::Create(Specs());
  std::vector<Column> columns;
  ParseOptions options;
  options.min_records_per_thread = 10;
  options.first_record_index = 1000;
  Status s = parser->Parse(Spans(records), &columns, options);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("feature 'label' of record 1321"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("float32"), std::string::npos) << s.message();

  records[321] = Batch(1)[0];
  s = parser->Parse(Spans(records), &columns, options);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_NE(s.message().find("record 1400"), std::string::npos) << s.message();
}

// ParseOptions::error_record: the failing record's index in the batch, as data.
TEST(ExampleParserTest, ErrorRecordIsTheFailingRecordsIndex) {
  auto records = Batch(500);
  auto parser = ExampleParser::Create(Specs());
  std::vector<Column> columns;
  ParseOptions options;
  options.min_records_per_thread = 10;
  options.first_record_index = 1000;
  uint64_t failed = 7;
  options.error_record = &failed;
  ASSERT_TRUE(parser->Parse(Spans(records), &columns, options).ok());
  EXPECT_EQ(failed, 7u);  // untouched without an error

  records[400] = "garbage that is not an Example";
  Features bad;
  bad["label"] = Feature::Floats({1.0f});  // wrong type
  records[321] = SerializeExample(bad);
  Status s = parser->Parse(Spans(records), &columns, options);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(failed, 321u);  // the first failing record, without first_record_index

  records[321] = Batch(1)[0];
  s = parser->Parse(Spans(records), &columns, options);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(failed, 400u);

  auto sequence = SequenceParser::Create({FeatureSpec::VarLen("tokens", DType::kInt64)});
  ASSERT_TRUE(sequence.ok()) << sequence.status().ToString();
  std::vector<std::string> sequences(3, std::string());
  sequences[2] = "garbage that is not an Example";
  s = sequence->Parse(Spans(sequences), &columns, options);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(failed, 2u);
}

TEST(ExampleParserTest, MissingRequiredAndWrongCount) {
  auto parser = ExampleParser::Create({FeatureSpec::FixedLen("xy", DType::kFloat32, {3})});
  std::vector<Column> columns;
  std::vector<std::string> records = {SerializeExample({{"xy", Feature::Floats({1, 2})}})};
  Status s = parser->Parse(Spans(records), &columns);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("has 2 values, but the spec's shape [3] needs 3"), std::string::npos)
      << s.message();
  records = {SerializeExample({{"other", Feature::Floats({1})}})};
  s = parser->Parse(Spans(records), &columns);
  EXPECT_NE(s.message().find("feature 'xy' of record 0: required feature is missing"),
            std::string::npos)
      << s.message();
}

TEST(ExampleParserTest, EmptyFeatureCountsAsMissing) {
  auto parser =
      ExampleParser::Create({FeatureSpec::FixedLen("k", DType::kInt64, {}, Feature::Int64s({9}))});
  std::vector<std::string> records = {SerializeExample({{"k", Feature{}}})};
  std::vector<Column> columns;
  ASSERT_TRUE(parser->Parse(Spans(records), &columns).ok());
  EXPECT_EQ(columns[0].int64s, std::vector<int64_t>{9});
}

TEST(ExampleParserTest, InvalidSpecsRejected) {
  EXPECT_FALSE(ExampleParser::Create({FeatureSpec::VarLen("a", DType::kInt64),
                                      FeatureSpec::VarLen("a", DType::kBytes)})
                   .ok());
  EXPECT_FALSE(ExampleParser::Create({FeatureSpec::FixedLen("a", DType::kInt64, {-1})}).ok());
  EXPECT_FALSE(ExampleParser::Create(
                   {FeatureSpec::FixedLen("a", DType::kInt64, {3}, Feature::Int64s({1, 2}))})
                   .ok());
  EXPECT_FALSE(
      ExampleParser::Create({FeatureSpec::FixedLen("a", DType::kInt64, {}, Feature::Floats({1}))})
          .ok());
}

}  // namespace
}  // namespace recordflow::example

namespace recordflow::example {
namespace {

TEST(SequenceParserTest, FixedAndVarLenSteps) {
  std::vector<std::string> records;
  for (int i = 0; i < 300; ++i) {
    SequenceExample se;
    se.context["id"] = Feature::Int64s({i});
    std::vector<Feature> xy, words;
    for (int s = 0; s < i % 4; ++s) {
      xy.push_back(Feature::Floats({static_cast<float>(i), static_cast<float>(s)}));
      std::vector<std::string> w(s, "r" + std::to_string(i));
      words.push_back(Feature::Bytes(w));
    }
    if (i % 5 != 0) se.feature_lists["xy"] = xy;  // every 5th record lacks the key: 0 steps
    se.feature_lists["words"] = words;
    records.push_back(SerializeSequenceExample(se));
  }
  auto parser = SequenceParser::Create({FeatureSpec::FixedLen("xy", DType::kFloat32, {2}),
                                        FeatureSpec::VarLen("words", DType::kBytes)});
  ASSERT_TRUE(parser.ok()) << parser.status().ToString();
  std::vector<Column> c;
  ParseOptions options;
  options.min_records_per_thread = 16;
  ASSERT_TRUE(parser->Parse(Spans(records), &c, options).ok());
  size_t step = 0, value = 0;
  for (int i = 0; i < 300; ++i) {
    int xy_steps = i % 5 != 0 ? i % 4 : 0;
    ASSERT_EQ(c[0].row_splits[i + 1] - c[0].row_splits[i], xy_steps) << i;
    for (int s = 0; s < xy_steps; ++s) {
      size_t at = static_cast<size_t>(c[0].row_splits[i] + s) * 2;
      ASSERT_EQ(c[0].floats[at], static_cast<float>(i));
      ASSERT_EQ(c[0].floats[at + 1], static_cast<float>(s));
    }
    ASSERT_EQ(c[1].row_splits[i], static_cast<int64_t>(step));
    for (int s = 0; s < i % 4; ++s, ++step) {
      ASSERT_EQ(c[1].step_splits[step], static_cast<int64_t>(value)) << i << " " << s;
      for (int w = 0; w < s; ++w, ++value) ASSERT_EQ(Str(c[1], value), "r" + std::to_string(i));
    }
  }
  EXPECT_EQ(c[1].step_splits.back(), static_cast<int64_t>(value));
  EXPECT_EQ(c[0].shape[1], 2);

  // The context has an Example's layout: an ExampleParser reads it from the same records.
  auto context = ExampleParser::Create({FeatureSpec::FixedLen("id", DType::kInt64)});
  std::vector<Column> ctx;
  ASSERT_TRUE(context->Parse(Spans(records), &ctx).ok());
  EXPECT_EQ(ctx[0].int64s[299], 299);
}

TEST(SequenceParserTest, WrongStepCountNamesStep) {
  SequenceExample se;
  se.feature_lists["xy"] = {Feature::Floats({1, 2}), Feature::Floats({1})};
  std::vector<std::string> records = {SerializeSequenceExample(se)};
  auto parser = SequenceParser::Create({FeatureSpec::FixedLen("xy", DType::kFloat32, {2})});
  std::vector<Column> c;
  Status s = parser->Parse(Spans(records), &c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("feature list 'xy' of record 0, step 1"), std::string::npos)
      << s.message();
  EXPECT_FALSE(SequenceParser::Create(
                   {FeatureSpec::FixedLen("xy", DType::kFloat32, {}, Feature::Floats({0}))})
                   .ok());
}

}  // namespace
}  // namespace recordflow::example
