// FeatureSpec::Kind::kFixedLenSequence (tf.io.FixedLenSequenceFeature) in both parsers, also
// against testdata/golden/fixed_len_sequence* (written and parsed by TensorFlow, see
// make_parsing_golden.py there).
#include <sstream>

#include <gtest/gtest.h>

#include "recordflow/example/parse.h"
#include "recordflow/example/parse_test_util.h"
#include "recordflow/format/record_test_util.h"

namespace recordflow::example {
namespace {

using testing::Spans;
using testing::Str;

std::string ExampleWith(const std::string& key, Feature f) {
  Features features;
  features[key] = std::move(f);
  return SerializeExample(features);
}

TEST(FixedLenSequenceTest, StacksItemsPerRecord) {
  // Across the parallel chunking threshold, so both passes run on several threads.
  std::vector<std::string> records;
  for (int i = 0; i < 400; ++i) {
    std::vector<int64_t> v;
    for (int j = 0; j < 2 * (i % 3); ++j) v.push_back(i * 10 + j);
    records.push_back(i % 7 == 0 ? SerializeExample({}) : ExampleWith("a", Feature::Int64s(v)));
  }
  auto parser = ExampleParser::Create(
      {FeatureSpec::FixedLenSequence("a", DType::kInt64, {2}, /*allow_missing=*/true)});
  ASSERT_TRUE(parser.ok()) << parser.status().ToString();
  std::vector<Column> c;
  ParseOptions options;
  options.min_records_per_thread = 16;
  ASSERT_TRUE(parser->Parse(Spans(records), &c, options).ok());
  ASSERT_EQ(c.size(), 1u);
  EXPECT_TRUE(c[0].ragged);
  ASSERT_EQ(c[0].row_splits.size(), 401u);
  int64_t pos = 0;
  for (int i = 0; i < 400; ++i) {
    const int64_t n = i % 7 == 0 ? 0 : 2 * (i % 3);
    ASSERT_EQ(c[0].row_splits[i], pos);
    for (int j = 0; j < n; ++j) ASSERT_EQ(c[0].int64s[pos++], i * 10 + j);
  }
  EXPECT_EQ(c[0].row_splits[400], pos);
  EXPECT_EQ(c[0].shape, (std::vector<int64_t>{pos / 2, 2}));
}

TEST(FixedLenSequenceTest, BytesAndFloats) {
  std::vector<std::string> records = {ExampleWith("s", Feature::Bytes({"x", "yy", "zzz"})),
                                      ExampleWith("f", Feature::Floats({1.5f}))};
  auto parser = ExampleParser::Create(
      {FeatureSpec::FixedLenSequence("s", DType::kBytes, {}, true, Feature::Bytes({"pad"})),
       FeatureSpec::FixedLenSequence("f", DType::kFloat32, {1}, true)});
  ASSERT_TRUE(parser.ok()) << parser.status().ToString();
  std::vector<Column> c;
  ASSERT_TRUE(parser->Parse(Spans(records), &c).ok());
  EXPECT_EQ(c[0].row_splits, (std::vector<int64_t>{0, 3, 3}));
  EXPECT_EQ(Str(c[0], 0), "x");
  EXPECT_EQ(Str(c[0], 2), "zzz");
  EXPECT_EQ(c[1].row_splits, (std::vector<int64_t>{0, 0, 1}));
  EXPECT_EQ(c[1].floats, (std::vector<float>{1.5f}));
}

TEST(FixedLenSequenceTest, ErrorsNameKeyAndRecord) {
  std::vector<std::string> records = {ExampleWith("a", Feature::Int64s({1, 2})),
                                      ExampleWith("a", Feature::Int64s({1, 2, 3}))};
  auto parser =
      ExampleParser::Create({FeatureSpec::FixedLenSequence("a", DType::kInt64, {2}, true)});
  std::vector<Column> c;
  ParseOptions options;
  options.first_record_index = 10;
  Status s = parser->Parse(Spans(records), &c, options);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("feature 'a' of record 11"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("not a multiple"), std::string::npos) << s.message();

  records[1] = ExampleWith("a", Feature::Floats({1, 2}));
  s = parser->Parse(Spans(records), &c, options);
  EXPECT_NE(s.message().find("feature 'a' of record 11"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("float32"), std::string::npos) << s.message();

  // Without allow_missing the feature is required.
  auto required =
      ExampleParser::Create({FeatureSpec::FixedLenSequence("a", DType::kInt64, {2}, false)});
  records[1] = SerializeExample({});
  s = required->Parse(Spans(records), &c, options);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("feature 'a' of record 11: required"), std::string::npos)
      << s.message();
}

TEST(FixedLenSequenceTest, InvalidSpecsRejected) {
  EXPECT_FALSE(
      ExampleParser::Create({FeatureSpec::FixedLenSequence("a", DType::kInt64, {2, 0}, true)})
          .ok());
  EXPECT_FALSE(
      ExampleParser::Create({FeatureSpec::FixedLenSequence("a", DType::kInt64, {-1}, true)}).ok());
  // Padding is one value of the spec's type.
  EXPECT_FALSE(ExampleParser::Create({FeatureSpec::FixedLenSequence("a", DType::kInt64, {2}, true,
                                                                    Feature::Int64s({1, 2}))})
                   .ok());
  EXPECT_FALSE(ExampleParser::Create({FeatureSpec::FixedLenSequence("a", DType::kInt64, {2}, true,
                                                                    Feature::Floats({1}))})
                   .ok());
}

std::string SequenceWith(const std::string& key, std::vector<Feature> steps) {
  SequenceExample se;
  se.feature_lists[key] = std::move(steps);
  return SerializeSequenceExample(se);
}

TEST(FixedLenSequenceTest, SequenceRequiredFeatureList) {
  std::vector<std::string> records = {
      SequenceWith("x", {Feature::Int64s({1, 2}), Feature::Int64s({3, 4})}),
      SequenceWith("y", {Feature::Int64s({5})})};
  auto optional =
      SequenceParser::Create({FeatureSpec::FixedLenSequence("x", DType::kInt64, {2}, true)});
  ASSERT_TRUE(optional.ok()) << optional.status().ToString();
  std::vector<Column> c;
  ASSERT_TRUE(optional->Parse(Spans(records), &c).ok());
  EXPECT_EQ(c[0].row_splits, (std::vector<int64_t>{0, 2, 2}));
  EXPECT_EQ(c[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(c[0].int64s, (std::vector<int64_t>{1, 2, 3, 4}));

  auto required =
      SequenceParser::Create({FeatureSpec::FixedLenSequence("x", DType::kInt64, {2}, false)});
  ASSERT_TRUE(required.ok());
  ParseOptions options;
  options.first_record_index = 5;
  Status s = required->Parse(Spans(records), &c, options);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("feature list 'x' of record 6: required"), std::string::npos)
      << s.message();

  // Each step holds exactly one item.
  records[1] = SequenceWith("x", {Feature::Int64s({1, 2, 3, 4})});
  s = required->Parse(Spans(records), &c, options);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("feature list 'x' of record 6, step 0"), std::string::npos)
      << s.message();
}

const std::string kGoldenDir = format::testing::GoldenDir();

std::vector<std::string> ReadRecords(const std::string& name) {
  return format::testing::ReadRecordsOrFail(kGoldenDir + "/" + name);
}

std::vector<std::vector<std::string>> ManifestLines() {
  std::vector<std::vector<std::string>> out;
  std::istringstream lines(
      format::testing::ReadTextOrFail(kGoldenDir + "/fixed_len_sequence_manifest.txt"));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::vector<std::string> w;
    std::string word;
    while (words >> word) w.push_back(word);
    out.push_back(std::move(w));
  }
  return out;
}

std::string Unhex(const std::string& hex) {
  if (hex == "-") return "";
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// Record r's values of column c, as the manifest writes them.
std::vector<std::string> ValuesOf(const Column& c, size_t r) {
  std::vector<std::string> out;
  for (int64_t j = c.row_splits[r]; j < c.row_splits[r + 1]; ++j) {
    if (c.dtype == DType::kInt64) out.push_back(std::to_string(c.int64s[j]));
    if (c.dtype == DType::kFloat32) out.push_back(std::to_string(c.floats[j]));
    if (c.dtype == DType::kBytes) out.push_back(Str(c, j));
  }
  return out;
}

std::vector<std::string> Expected(const std::vector<std::string>& line, DType dtype) {
  std::vector<std::string> out;
  for (size_t i = 4; i < line.size(); ++i) {
    if (dtype == DType::kBytes) out.push_back(Unhex(line[i]));
    if (dtype == DType::kFloat32) out.push_back(std::to_string(std::stof(line[i])));
    if (dtype == DType::kInt64) out.push_back(line[i]);
  }
  return out;
}

TEST(FixedLenSequenceGoldenTest, ParsesAsTensorFlowDoes) {
  const std::vector<FeatureSpec> specs = {
      FeatureSpec::FixedLenSequence("seq", DType::kInt64, {2}, true),
      FeatureSpec::FixedLenSequence("s", DType::kBytes, {}, true),
      FeatureSpec::FixedLenSequence("f", DType::kFloat32, {1}, true)};
  auto parser = ExampleParser::Create(specs);
  ASSERT_TRUE(parser.ok());
  const auto records = ReadRecords("fixed_len_sequence.tfrecord");
  ASSERT_EQ(records.size(), 5u);
  std::vector<Column> c;
  ASSERT_TRUE(parser->Parse(Spans(records), &c).ok());
  int checked = 0;
  bool bad_checked = false;
  for (const auto& line : ManifestLines()) {
    if (line[0] == "bad_example") {
      std::vector<std::string> bad = {Unhex(line[2])};
      Status s = parser->Parse(Spans(bad), &c);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
      EXPECT_NE(s.message().find("feature '" + line[1] + "' of record 0"), std::string::npos)
          << s.message();
      ASSERT_TRUE(parser->Parse(Spans(records), &c).ok());
      bad_checked = true;
      continue;
    }
    if (line[0] != "example") continue;
    const size_t r = std::stoul(line[1]);
    size_t k = 0;
    while (k < specs.size() && specs[k].key != line[2]) ++k;
    ASSERT_LT(k, specs.size()) << line[2];
    const int64_t stride = specs[k].num_elements();
    EXPECT_EQ((c[k].row_splits[r + 1] - c[k].row_splits[r]) / stride, std::stoll(line[3]))
        << "record " << r << " key " << line[2];
    EXPECT_EQ(ValuesOf(c[k], r), Expected(line, specs[k].dtype))
        << "record " << r << " key " << line[2];
    ++checked;
  }
  EXPECT_EQ(checked, 15);
  EXPECT_TRUE(bad_checked);
}

TEST(FixedLenSequenceGoldenTest, RequiredFeatureListAsTensorFlow) {
  const std::vector<FeatureSpec> specs = {
      FeatureSpec::FixedLenSequence("x", DType::kInt64, {2}, false),
      FeatureSpec::FixedLenSequence("y", DType::kFloat32, {}, true)};
  auto parser = SequenceParser::Create(specs);
  ASSERT_TRUE(parser.ok());
  const auto records = ReadRecords("required_feature_list.tfrecord");
  ASSERT_EQ(records.size(), 4u);
  int checked = 0;
  for (const auto& line : ManifestLines()) {
    if (line[0] != "sequence" && line[0] != "missing_list") continue;
    const size_t r = std::stoul(line[1]);
    std::vector<std::string> one = {records[r]};
    std::vector<Column> c;
    Status s = parser->Parse(Spans(one), &c);
    if (line[0] == "missing_list") {
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
      EXPECT_NE(s.message().find("feature list '" + line[2] + "' of record 0: required"),
                std::string::npos)
          << s.message();
      ++checked;
      continue;
    }
    ASSERT_TRUE(s.ok()) << s.ToString();
    const size_t k = line[2] == "x" ? 0 : 1;
    EXPECT_EQ(c[k].row_splits[1], std::stoll(line[3])) << "record " << r << " key " << line[2];
    // The sequence parser's row_splits count steps; each step holds num_elements() values.
    std::vector<std::string> got;
    const size_t n = static_cast<size_t>(c[k].row_splits[1] * specs[k].num_elements());
    for (size_t j = 0; j < n; ++j) {
      got.push_back(k == 0 ? std::to_string(c[k].int64s[j]) : std::to_string(c[k].floats[j]));
    }
    EXPECT_EQ(got, Expected(line, specs[k].dtype)) << "record " << r << " key " << line[2];
    ++checked;
  }
  EXPECT_EQ(checked, 7);
}

}  // namespace
}  // namespace recordflow::example
