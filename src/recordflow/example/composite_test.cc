// SparseFeature / RaggedFeature building (composite.h): every partition kind and every error,
// and testdata/golden/composite* (written and parsed by TensorFlow, see
// make_composite_golden.py there) parsed without TensorFlow.
#include "recordflow/example/composite.h"

#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "recordflow/example/parse.h"
#include "recordflow/format/record_test_util.h"

namespace recordflow::example {
namespace {

using Kind = RowPartition::Kind;
using Splits = std::vector<std::vector<int64_t>>;

RowPartition Part(Kind kind, std::string key) { return {kind, std::move(key), 0}; }
RowPartition Uniform(int64_t n) { return {Kind::kUniformRowLength, "", n}; }

// One-unit helper: values count `n`, one partition column with `v`.
Status OneUnit(const RowPartition& p, std::vector<int64_t> v, int64_t n, Splits* levels,
               uint64_t first = 0) {
  std::vector<int64_t> value_splits = {0, n};
  std::vector<int64_t> splits = {0, static_cast<int64_t>(v.size())};
  std::vector<Int64Rows> cols;
  if (p.kind != Kind::kUniformRowLength) cols.push_back({v, splits});
  std::vector<RowPartition> parts = {p};
  CompositeOptions options;
  options.first_record_index = first;
  return BuildRaggedRowSplits("rt", parts, value_splits, cols, options, levels);
}

TEST(CompositeTest, EveryPartitionKindGivesTheSameRows) {
  // Rows [[a b c] [] [d e] [f]] over 6 values.
  const Splits expected = {{0, 4}, {0, 3, 3, 5, 6}};
  const std::vector<std::pair<RowPartition, std::vector<int64_t>>> cases = {
      {Part(Kind::kRowSplits, "s"), {0, 3, 3, 5, 6}},
      {Part(Kind::kRowLengths, "l"), {3, 0, 2, 1}},
      {Part(Kind::kRowStarts, "st"), {0, 3, 3, 5}},
      {Part(Kind::kRowLimits, "li"), {3, 3, 5, 6}},
      {Part(Kind::kValueRowIds, "id"), {0, 0, 0, 2, 2, 3}},
  };
  for (const auto& [p, v] : cases) {
    Splits levels;
    Status s = OneUnit(p, v, 6, &levels);
    ASSERT_TRUE(s.ok()) << p.key << ": " << s.ToString();
    EXPECT_EQ(levels, expected) << p.key;
  }
  Splits levels;
  ASSERT_TRUE(OneUnit(Uniform(2), {}, 6, &levels).ok());
  EXPECT_EQ(levels, (Splits{{0, 3}, {0, 2, 4, 6}}));
  ASSERT_TRUE(OneUnit(Uniform(0), {}, 0, &levels).ok());
  EXPECT_EQ(levels, (Splits{{0, 0}, {0}}));
}

TEST(CompositeTest, BadPartitionsNameKeyPartitionAndRecord) {
  const std::vector<std::tuple<RowPartition, std::vector<int64_t>, int64_t, std::string>> cases = {
      {Part(Kind::kRowSplits, "s"),
       {1, 3},
       3,
       "partition feature 's': row splits must start with 0"},
      {Part(Kind::kRowSplits, "s"), {0, 3, 2}, 2, "rows must not end before they start"},
      {Part(Kind::kRowSplits, "s"), {0, 2}, 3, "the rows cover 2 items, but there are 3"},
      {Part(Kind::kRowLengths, "l"), {2, -1}, 1, "row lengths must be >= 0"},
      {Part(Kind::kRowLengths, "l"), {5}, 0, "the rows cover 5 items, but there are 0"},
      {Part(Kind::kRowLengths, "l"), {INT64_MAX, 2}, 1, "the rows cover more than"},
      {Part(Kind::kRowStarts, "st"), {1}, 2, "row starts must start with 0"},
      {Part(Kind::kRowStarts, "st"), {0, 3}, 2, "rows must not end before they start"},
      {Part(Kind::kRowLimits, "li"), {2, 1}, 1, "rows must not end before they start"},
      {Part(Kind::kValueRowIds, "id"), {0, 0}, 3, "2 value row ids for 3 items"},
      {Part(Kind::kValueRowIds, "id"), {1, 0}, 2, "value row ids must be >= 0 and non-decreasing"},
      {Part(Kind::kValueRowIds, "id"), {-1}, 1, "value row ids must be >= 0 and non-decreasing"},
      {Part(Kind::kValueRowIds, "id"), {int64_t{1} << 40}, 1, "at or above the safety limit"},
      {Uniform(2),
       {},
       3,
       "partition UniformRowLength(2): 3 items are not a multiple of the uniform "
       "row length 2"},
      {Uniform(0), {}, 1, "1 items cannot form rows of length 0"},
  };
  for (const auto& [p, v, n, needle] : cases) {
    Splits levels;
    Status s = OneUnit(p, v, n, &levels, /*first=*/40);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << needle;
    EXPECT_NE(s.message().find("feature 'rt' of record 40: "), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  }
}

TEST(CompositeTest, FeatureListStepsAreNamed) {
  // Two records: the first with 1 step, the second with 2; step 1 of record 1 is bad.
  std::vector<int64_t> values = {0, 2, 4, 5};  // step value counts 2, 2, 1
  std::vector<int64_t> lengths = {2, 1, 1, 2};
  std::vector<int64_t> lsplits = {0, 1, 3, 4};  // step 2 (record 1, step 1) says 2, has 1
  std::vector<Int64Rows> cols = {{lengths, lsplits}};
  std::vector<RowPartition> parts = {Part(Kind::kRowLengths, "l")};
  std::vector<int64_t> records = {0, 1, 3};
  CompositeOptions options;
  options.record_splits = records;
  options.first_record_index = 10;
  Splits levels;
  Status s = BuildRaggedRowSplits("seq", parts, values, cols, options, &levels);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("feature list 'seq' of record 11, step 1: partition feature 'l': "
                             "the rows cover 2 items, but there are 1"),
            std::string::npos)
      << s.message();
}

TEST(CompositeTest, MismatchedColumnsAreRefusedNotRead) {
  std::vector<int64_t> value_splits = {0, 2, 4};
  std::vector<int64_t> v = {0, 2};
  std::vector<int64_t> short_splits = {0, 2};  // one unit, the values have two
  std::vector<Int64Rows> cols = {{v, short_splits}};
  std::vector<RowPartition> parts = {Part(Kind::kRowSplits, "s")};
  Splits levels;
  EXPECT_EQ(BuildRaggedRowSplits("rt", parts, value_splits, cols, {}, &levels).code(),
            StatusCode::kInvalidArgument);
  std::vector<int64_t> past_end = {0, 1, 9};
  cols[0].splits = past_end;
  EXPECT_EQ(BuildRaggedRowSplits("rt", parts, value_splits, cols, {}, &levels).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(BuildRaggedRowSplits("rt", parts, value_splits, {}, {}, &levels).code(),
            StatusCode::kInvalidArgument);
}

TEST(CompositeTest, SparseSortsPerRecordAndChecks) {
  SparseSpec spec{"sp", {"i", "j"}, "v", {10, 4}, false};
  std::vector<int64_t> vsplits = {0, 3, 3, 5};
  std::vector<int64_t> i = {5, 1, 5, 2, 3};
  std::vector<int64_t> j = {1, 3, 0, 0, 0};
  std::vector<Int64Rows> cols = {{i, vsplits}, {j, vsplits}};
  SparseIndices out;
  ASSERT_TRUE(BuildSparseIndices(spec, cols, vsplits, 0, &out).ok());
  EXPECT_EQ(out.indices, (std::vector<int64_t>{0, 1, 3, 0, 5, 0, 0, 5, 1, 2, 2, 0, 2, 3, 0}));
  EXPECT_EQ(out.order, (std::vector<int64_t>{1, 2, 0, 3, 4}));
  spec.already_sorted = true;
  ASSERT_TRUE(BuildSparseIndices(spec, cols, vsplits, 0, &out).ok());
  EXPECT_TRUE(out.order.empty());
  EXPECT_EQ(out.indices[1], 5);

  spec.sizes = {5, 4};
  Status s = BuildSparseIndices(spec, cols, vsplits, 7, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "feature 'i' of record 7: index 5 is outside [0, 5) (SparseFeature 'sp')");
  std::vector<int64_t> jsplits = {0, 3, 4, 5};
  cols[1].splits = jsplits;
  spec.sizes = {10, 4};
  s = BuildSparseIndices(spec, cols, vsplits, 7, &out);
  EXPECT_EQ(s.message(),
            "feature 'j' of record 8: 1 indices, but value feature 'v' has 0 values "
            "(SparseFeature 'sp')");
}

// ---- testdata/golden/composite*: TensorFlow's results ----

const std::string kGoldenDir = format::testing::GoldenDir();

std::vector<std::string> ReadRecords(const std::string& name) {
  return format::testing::ReadRecordsOrFail(kGoldenDir + "/" + name);
}

struct Golden {
  // name -> tokens after the name, per line kind.
  std::map<std::string, std::vector<std::string>> ragged_specs, sparse_specs;
  std::map<std::string, std::vector<std::vector<int64_t>>> ragged_splits;
  std::map<std::string, std::vector<double>> ragged_values, sparse_values;
  std::map<std::string, std::vector<int64_t>> sparse_indices, sparse_shape;
};

Golden ReadManifest() {
  Golden g;
  std::istringstream lines(format::testing::ReadTextOrFail(kGoldenDir + "/composite_manifest.txt"));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string kind, name, what, tok;
    in >> kind >> name;
    std::vector<std::string> rest;
    while (in >> tok) rest.push_back(tok);
    if (kind == "ragged_spec") {
      g.ragged_specs[name] = rest;
    } else if (kind == "sparse_spec") {
      g.sparse_specs[name] = rest;
    } else {
      what = rest.front();
      rest.erase(rest.begin());
      if (kind == "ragged" && what == "splits") {
        rest.erase(rest.begin());  // the level: lines come in order
        std::vector<int64_t> v;
        for (const auto& t : rest) v.push_back(std::stoll(t));
        g.ragged_splits[name].push_back(v);
      } else if (what == "values") {
        auto& out = kind == "ragged" ? g.ragged_values[name] : g.sparse_values[name];
        for (const auto& t : rest) out.push_back(std::stod(t));
      } else {
        auto& out = what == "indices" ? g.sparse_indices[name] : g.sparse_shape[name];
        for (const auto& t : rest) out.push_back(std::stoll(t));
      }
    }
  }
  return g;
}

// Parses `keys` of the golden records as VarLen columns (float values, int64 the rest).
std::map<std::string, Column> ParseColumns(const std::vector<std::string>& records,
                                           const std::vector<std::string>& keys) {
  std::vector<FeatureSpec> specs;
  for (const auto& k : keys) {
    specs.push_back(
        FeatureSpec::VarLen(k, k == "rt_values" || k == "val" ? DType::kFloat32 : DType::kInt64));
  }
  auto parser = ExampleParser::Create(specs);
  EXPECT_TRUE(parser.ok()) << parser.status().ToString();
  std::vector<std::span<const std::byte>> spans;
  for (const auto& r : records) spans.push_back(std::as_bytes(std::span(r.data(), r.size())));
  std::vector<Column> cols;
  Status s = parser->Parse(spans, &cols);
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::map<std::string, Column> out;
  for (auto& c : cols) out[c.key] = std::move(c);
  return out;
}

Kind KindNamed(const std::string& name) {
  if (name == "RowSplits") return Kind::kRowSplits;
  if (name == "RowLengths") return Kind::kRowLengths;
  if (name == "RowStarts") return Kind::kRowStarts;
  if (name == "RowLimits") return Kind::kRowLimits;
  if (name == "ValueRowIds") return Kind::kValueRowIds;
  EXPECT_EQ(name, "UniformRowLength");
  return Kind::kUniformRowLength;
}

TEST(CompositeGoldenTest, RaggedAsTensorFlow) {
  const std::vector<std::string> records = ReadRecords("composite.tfrecord");
  ASSERT_EQ(records.size(), 4u);
  const Golden g = ReadManifest();
  ASSERT_EQ(g.ragged_specs.size(), 8u);
  for (const auto& [name, spec] : g.ragged_specs) {
    std::vector<std::string> keys = {spec[0]};
    std::vector<RowPartition> parts;
    for (size_t i = 1; i < spec.size(); ++i) {
      const size_t colon = spec[i].find(':');
      RowPartition p;
      p.kind = KindNamed(spec[i].substr(0, colon));
      if (p.kind == Kind::kUniformRowLength) {
        p.uniform_length = std::stoll(spec[i].substr(colon + 1));
      } else {
        p.key = spec[i].substr(colon + 1);
        keys.push_back(p.key);
      }
      parts.push_back(p);
    }
    std::map<std::string, Column> cols = ParseColumns(records, keys);
    std::vector<Int64Rows> pcols;
    for (size_t i = 1; i < keys.size(); ++i) {
      pcols.push_back({cols[keys[i]].int64s, cols[keys[i]].row_splits});
    }
    Splits levels;
    Status s = BuildRaggedRowSplits(name, parts, cols[spec[0]].row_splits, pcols, {}, &levels);
    ASSERT_TRUE(s.ok()) << name << ": " << s.ToString();
    if (parts.back().kind == Kind::kUniformRowLength) {
      // TensorFlow keeps an innermost uniform dimension dense (values [rows, n]), not as
      // row splits: ours are every n-th value.
      const int64_t n = parts.back().uniform_length;
      for (size_t i = 0; i < levels.back().size(); ++i) {
        EXPECT_EQ(levels.back()[i], static_cast<int64_t>(i) * n) << name;
      }
      levels.pop_back();
    }
    EXPECT_EQ(levels, g.ragged_splits.at(name)) << name;
    const std::vector<float>& values = cols[spec[0]].floats;
    EXPECT_EQ(std::vector<double>(values.begin(), values.end()), g.ragged_values.at(name)) << name;
  }
}

TEST(CompositeGoldenTest, SparseAsTensorFlow) {
  const std::vector<std::string> records = ReadRecords("composite.tfrecord");
  const Golden g = ReadManifest();
  ASSERT_EQ(g.sparse_specs.size(), 3u);
  for (const auto& [name, tokens] : g.sparse_specs) {
    SparseSpec spec;
    spec.key = name;
    spec.value_key = tokens[0];
    spec.already_sorted = tokens[1] == "1";
    std::vector<std::string> keys = {spec.value_key};
    for (size_t i = 2; i < tokens.size(); ++i) {
      const size_t colon = tokens[i].find(':');
      spec.index_keys.push_back(tokens[i].substr(0, colon));
      spec.sizes.push_back(std::stoll(tokens[i].substr(colon + 1)));
      keys.push_back(spec.index_keys.back());
    }
    std::map<std::string, Column> cols = ParseColumns(records, keys);
    std::vector<Int64Rows> icols;
    for (const auto& k : spec.index_keys) icols.push_back({cols[k].int64s, cols[k].row_splits});
    SparseIndices out;
    Status s = BuildSparseIndices(spec, icols, cols[spec.value_key].row_splits, 0, &out);
    ASSERT_TRUE(s.ok()) << name << ": " << s.ToString();
    EXPECT_EQ(out.indices, g.sparse_indices.at(name)) << name;
    const std::vector<float>& v = cols[spec.value_key].floats;
    std::vector<double> values;
    for (size_t j = 0; j < v.size(); ++j) {
      values.push_back(v[static_cast<size_t>(out.order.empty() ? j : out.order[j])]);
    }
    EXPECT_EQ(values, g.sparse_values.at(name)) << name;
    std::vector<int64_t> shape = {static_cast<int64_t>(records.size())};
    shape.insert(shape.end(), spec.sizes.begin(), spec.sizes.end());
    EXPECT_EQ(shape, g.sparse_shape.at(name)) << name;
  }
}

}  // namespace
}  // namespace recordflow::example
