#include "recordflow/example/schema.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "recordflow/example/wire_test_util.h"
#include "recordflow/format/record_reader.h"

namespace recordflow::example {
namespace {

std::span<const std::byte> Bytes(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

Schema Infer(const std::vector<std::string>& records, SchemaOptions options = {}) {
  SchemaInference inference(options);
  for (const std::string& r : records) inference.Add(Bytes(r));
  return inference.schema();
}

const KeyStats* Find(const Schema& schema, std::string_view key) {
  for (const KeyStats& k : schema.keys) {
    if (k.key == key) return &k;
  }
  return nullptr;
}

std::vector<std::string> Keys(const Schema& schema) {
  std::vector<std::string> out;
  for (const KeyStats& k : schema.keys) out.push_back(k.key);
  return out;
}

using testing::LengthDelimited;
using testing::Varint;

// An Example with one map entry whose Feature bytes are given verbatim.
std::string ExampleWithRawFeature(const std::string& key, const std::string& feature) {
  const std::string entry = LengthDelimited(1, key) + LengthDelimited(2, feature);
  return LengthDelimited(1, LengthDelimited(1, entry));
}

TEST(SchemaInferenceTest, NoRecords) {
  Schema schema = Infer({});
  EXPECT_EQ(schema.records, 0u);
  EXPECT_EQ(schema.examples, 0u);
  EXPECT_EQ(schema.malformed_records, 0u);
  EXPECT_TRUE(schema.first_malformed_error.ok());
  EXPECT_TRUE(schema.keys.empty());
  EXPECT_EQ(schema.mean_record_bytes(), 0.0);
  EXPECT_TRUE(schema.ProposeSpecs().empty());
}

TEST(SchemaInferenceTest, UniformRecords) {
  std::vector<std::string> records;
  for (int i = 0; i < 4; ++i) {
    Features f;
    f["label"] = Feature::Int64s({i});
    f["xy"] = Feature::Floats({1.0f * i, -1.0f * i});
    f["name"] = Feature::Bytes({std::string(i + 1, 'n')});  // 1..4 bytes
    records.push_back(SerializeExample(f));
  }
  Schema schema = Infer(records);
  EXPECT_EQ(schema.records, 4u);
  EXPECT_EQ(schema.examples, 4u);
  EXPECT_EQ(schema.empty_examples, 0u);
  EXPECT_EQ(schema.malformed_records, 0u);
  EXPECT_EQ(Keys(schema), (std::vector<std::string>{"label", "name", "xy"}));  // sorted

  uint64_t total = 0, lo = UINT64_MAX, hi = 0;
  for (const auto& r : records) {
    total += r.size();
    lo = std::min<uint64_t>(lo, r.size());
    hi = std::max<uint64_t>(hi, r.size());
  }
  EXPECT_EQ(schema.total_record_bytes, total);
  EXPECT_EQ(schema.min_record_bytes, lo);
  EXPECT_EQ(schema.max_record_bytes, hi);
  EXPECT_DOUBLE_EQ(schema.mean_record_bytes(), total / 4.0);

  const KeyStats* label = Find(schema, "label");
  ASSERT_NE(label, nullptr);
  EXPECT_EQ(label->kinds(), std::vector<ListKind>{ListKind::kInt64});
  EXPECT_FALSE(label->conflicting());
  EXPECT_EQ(label->records_present(), 4u);
  EXPECT_DOUBLE_EQ(schema.presence(*label), 1.0);
  EXPECT_EQ(label->min_values, 1u);
  EXPECT_EQ(label->max_values, 1u);
  EXPECT_DOUBLE_EQ(label->mean_values(), 1.0);
  EXPECT_EQ(label->bytes_values, 0u);

  const KeyStats* xy = Find(schema, "xy");
  ASSERT_NE(xy, nullptr);
  EXPECT_EQ(xy->kinds(), std::vector<ListKind>{ListKind::kFloat});
  EXPECT_EQ(xy->total_values, 8u);

  const KeyStats* name = Find(schema, "name");
  ASSERT_NE(name, nullptr);
  EXPECT_EQ(name->kinds(), std::vector<ListKind>{ListKind::kBytes});
  EXPECT_EQ(name->bytes_values, 4u);
  EXPECT_EQ(name->total_value_bytes, 10u);
  EXPECT_EQ(name->min_value_bytes, 1u);
  EXPECT_EQ(name->max_value_bytes, 4u);
  EXPECT_DOUBLE_EQ(name->mean_value_bytes(), 2.5);

  std::vector<FeatureSpec> specs = schema.ProposeSpecs();
  ASSERT_EQ(specs.size(), 3u);
  EXPECT_EQ(specs[0].key, "label");
  EXPECT_EQ(specs[0].kind, FeatureSpec::Kind::kFixedLen);
  EXPECT_EQ(specs[0].dtype, DType::kInt64);
  EXPECT_TRUE(specs[0].shape.empty());
  EXPECT_FALSE(specs[0].default_value.has_value());
  EXPECT_EQ(specs[1].key, "name");
  EXPECT_EQ(specs[1].kind, FeatureSpec::Kind::kFixedLen);
  EXPECT_EQ(specs[1].dtype, DType::kBytes);
  EXPECT_TRUE(specs[1].shape.empty());
  EXPECT_EQ(specs[2].key, "xy");
  EXPECT_EQ(specs[2].kind, FeatureSpec::Kind::kFixedLen);
  EXPECT_EQ(specs[2].dtype, DType::kFloat32);
  EXPECT_EQ(specs[2].shape, std::vector<int64_t>{2});
}

TEST(SchemaInferenceTest, MissingKeysGiveVarLen) {
  std::vector<std::string> records;
  for (int i = 0; i < 5; ++i) {
    Features f;
    f["always"] = Feature::Int64s({i});
    if (i % 5 != 0) f["mostly"] = Feature::Floats({0.5f, 1.5f, 2.5f});  // 4 of 5
    records.push_back(SerializeExample(f));
  }
  Schema schema = Infer(records);
  const KeyStats* mostly = Find(schema, "mostly");
  ASSERT_NE(mostly, nullptr);
  EXPECT_EQ(mostly->records_present(), 4u);
  EXPECT_DOUBLE_EQ(schema.presence(*mostly), 0.8);
  // Value counts are over the records where the key is present, not all records.
  EXPECT_EQ(mostly->min_values, 3u);
  EXPECT_EQ(mostly->max_values, 3u);
  EXPECT_DOUBLE_EQ(mostly->mean_values(), 3.0);

  std::optional<FeatureSpec> spec = schema.ProposeSpec(*mostly);
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->kind, FeatureSpec::Kind::kVarLen);
  EXPECT_EQ(spec->dtype, DType::kFloat32);
  EXPECT_TRUE(spec->shape.empty());
  EXPECT_EQ(schema.ProposeSpec(*Find(schema, "always"))->kind, FeatureSpec::Kind::kFixedLen);
}

TEST(SchemaInferenceTest, VaryingCountsGiveVarLen) {
  std::vector<std::string> records;
  for (int n : {2, 0, 5}) {
    Features f;
    f["tags"] = Feature::Bytes(std::vector<std::string>(n, "ab"));
    records.push_back(SerializeExample(f));
  }
  Schema schema = Infer(records);
  const KeyStats* tags = Find(schema, "tags");
  ASSERT_NE(tags, nullptr);
  EXPECT_EQ(tags->records_present(), 3u);  // an empty list is present
  EXPECT_EQ(tags->min_values, 0u);
  EXPECT_EQ(tags->max_values, 5u);
  EXPECT_DOUBLE_EQ(tags->mean_values(), 7.0 / 3.0);
  EXPECT_EQ(tags->bytes_values, 7u);
  EXPECT_EQ(tags->total_value_bytes, 14u);
  EXPECT_EQ(schema.ProposeSpec(*tags)->kind, FeatureSpec::Kind::kVarLen);
  EXPECT_EQ(schema.ProposeSpec(*tags)->dtype, DType::kBytes);
}

TEST(SchemaInferenceTest, AlwaysEmptyListsGiveVarLen) {
  Features f;
  f["empty_ints"] = Feature::Int64s({});
  f["empty_bytes"] = Feature::Bytes({});
  Schema schema = Infer({SerializeExample(f), SerializeExample(f)});
  for (const char* key : {"empty_ints", "empty_bytes"}) {
    SCOPED_TRACE(key);
    const KeyStats* stats = Find(schema, key);
    ASSERT_NE(stats, nullptr);
    EXPECT_EQ(stats->records_present(), 2u);
    EXPECT_EQ(stats->max_values, 0u);
    EXPECT_EQ(stats->records_empty_feature, 0u);
    std::optional<FeatureSpec> spec = schema.ProposeSpec(*stats);
    ASSERT_TRUE(spec.has_value());
    EXPECT_EQ(spec->kind, FeatureSpec::Kind::kVarLen);
  }
  EXPECT_EQ(schema.ProposeSpec(*Find(schema, "empty_ints"))->dtype, DType::kInt64);
  EXPECT_EQ(schema.ProposeSpec(*Find(schema, "empty_bytes"))->dtype, DType::kBytes);
  EXPECT_EQ(Find(schema, "empty_bytes")->bytes_values, 0u);
  EXPECT_EQ(Find(schema, "empty_bytes")->mean_value_bytes(), 0.0);
}

TEST(SchemaInferenceTest, EmptyFeatureIsNotPresent) {
  // A Feature with no list set: the parsers treat it as missing, so it rules out FixedLen.
  Features with_list;
  with_list["k"] = Feature::Int64s({7});
  Features without_list;
  without_list["k"] = Feature{};
  Schema schema = Infer({SerializeExample(with_list), SerializeExample(without_list)});
  const KeyStats* k = Find(schema, "k");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->records_present(), 1u);
  EXPECT_EQ(k->records_empty_feature, 1u);
  EXPECT_DOUBLE_EQ(schema.presence(*k), 0.5);
  EXPECT_EQ(schema.ProposeSpec(*k)->kind, FeatureSpec::Kind::kVarLen);

  // Only ever empty Features: no dtype to propose.
  Schema only_empty = Infer({SerializeExample(without_list)});
  ASSERT_EQ(only_empty.keys.size(), 1u);
  EXPECT_TRUE(only_empty.keys[0].kinds().empty());
  EXPECT_FALSE(only_empty.ProposeSpec(only_empty.keys[0]).has_value());
  EXPECT_TRUE(only_empty.ProposeSpecs().empty());
}

TEST(SchemaInferenceTest, ConflictingKinds) {
  Features a;
  a["x"] = Feature::Int64s({1});
  a["ok"] = Feature::Int64s({1});
  Features b;
  b["x"] = Feature::Floats({1.0f, 2.0f});
  b["ok"] = Feature::Int64s({2});
  Features c;
  c["x"] = Feature::Int64s({3});
  c["ok"] = Feature::Int64s({3});
  Schema schema = Infer({SerializeExample(a), SerializeExample(b), SerializeExample(c)});
  const KeyStats* x = Find(schema, "x");
  ASSERT_NE(x, nullptr);
  EXPECT_TRUE(x->conflicting());
  EXPECT_EQ(x->kinds(), (std::vector<ListKind>{ListKind::kFloat, ListKind::kInt64}));
  EXPECT_EQ(x->records_by_kind[static_cast<size_t>(ListKind::kInt64)], 2u);
  EXPECT_EQ(x->records_by_kind[static_cast<size_t>(ListKind::kFloat)], 1u);
  EXPECT_EQ(x->records_present(), 3u);
  EXPECT_EQ(x->min_values, 1u);
  EXPECT_EQ(x->max_values, 2u);
  EXPECT_FALSE(schema.ProposeSpec(*x).has_value());
  // The conflicting key is left out; the others are still proposed.
  std::vector<FeatureSpec> specs = schema.ProposeSpecs();
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].key, "ok");
}

TEST(SchemaInferenceTest, MalformedRecordsAreCountedNotFatal) {
  Features f;
  f["label"] = Feature::Int64s({1});
  const std::string good = SerializeExample(f);
  // A well-formed Example around an Int64List whose packed varint is cut short.
  const std::string bad_list =
      ExampleWithRawFeature("poison", LengthDelimited(3, LengthDelimited(1, "\x80")));
  const std::string truncated = good.substr(0, good.size() - 1);
  const std::vector<std::string> records = {
      good, "alpha", truncated, std::string("\x00", 1), bad_list, std::string(300, '\xff'), good};
  Schema schema = Infer(records);
  EXPECT_EQ(schema.records, 7u);
  EXPECT_EQ(schema.examples, 2u);
  EXPECT_EQ(schema.malformed_records, 5u);
  EXPECT_EQ(schema.first_malformed_record, 1u);
  EXPECT_EQ(schema.first_malformed_error.code(), StatusCode::kDataLoss);
  EXPECT_NE(schema.first_malformed_error.message().find("Example"), std::string::npos)
      << schema.first_malformed_error.ToString();
  // Nothing of a malformed record leaks into the statistics, not even its well-formed keys.
  EXPECT_EQ(Keys(schema), std::vector<std::string>{"label"});
  EXPECT_EQ(schema.keys[0].records_present(), 2u);
  EXPECT_DOUBLE_EQ(schema.presence(schema.keys[0]), 1.0);
  // Presence is over well-formed records, so the key can still be a required FixedLen.
  EXPECT_EQ(schema.ProposeSpec(schema.keys[0])->kind, FeatureSpec::Kind::kFixedLen);
  // Record sizes cover every record, malformed ones included.
  EXPECT_EQ(schema.max_record_bytes, 300u);
  EXPECT_EQ(schema.min_record_bytes, 1u);
}

TEST(SchemaInferenceTest, EmptyRecordIsAnEmptyExample) {
  // As in protobuf: zero bytes (and bytes of unknown fields only) decode as an Example with no
  // features.
  const std::string unknown_field = Varint(5 << 3 | 0) + Varint(42);
  Schema schema = Infer({"", unknown_field});
  EXPECT_EQ(schema.examples, 2u);
  EXPECT_EQ(schema.empty_examples, 2u);
  EXPECT_EQ(schema.malformed_records, 0u);
  EXPECT_TRUE(schema.keys.empty());
  EXPECT_EQ(schema.min_record_bytes, 0u);
}

TEST(SchemaInferenceTest, RepeatedKeyCountsOnceWithItsLastEntry) {
  // Two `features` fields are merged by protobuf; for a key in both, the last entry wins.
  Features first;
  first["k"] = Feature::Int64s({1, 2, 3});
  first["only_first"] = Feature::Floats({1.0f});
  Features second;
  second["k"] = Feature::Bytes({"abcd"});
  const std::string merged = SerializeExample(first) + SerializeExample(second);
  Schema schema = Infer({merged});
  EXPECT_EQ(schema.examples, 1u);
  const KeyStats* k = Find(schema, "k");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->records_present(), 1u);
  EXPECT_EQ(k->kinds(), std::vector<ListKind>{ListKind::kBytes});  // not conflicting
  EXPECT_EQ(k->total_values, 1u);
  EXPECT_EQ(k->total_value_bytes, 4u);
  ASSERT_NE(Find(schema, "only_first"), nullptr);
}

TEST(SchemaInferenceTest, MaxKeysLimitsWhatIsDescribed) {
  Features f;
  f["a"] = Feature::Int64s({1});
  f["b"] = Feature::Int64s({1});
  f["c"] = Feature::Int64s({1});
  SchemaOptions options;
  options.max_keys = 2;
  Schema schema = Infer({SerializeExample(f), SerializeExample(f)}, options);
  EXPECT_EQ(Keys(schema), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(schema.untracked_features, 2u);
  EXPECT_EQ(schema.keys[0].records_present(), 2u);
}

TEST(SchemaInferenceTest, SnapshotsAreIndependentOfLaterRecords) {
  SchemaInference inference;
  Features f;
  f["k"] = Feature::Int64s({1});
  const std::string record = SerializeExample(f);
  inference.Add(Bytes(record));
  Schema before = inference.schema();
  inference.Add(Bytes(std::string("junk")));
  inference.Add(Bytes(record));
  EXPECT_EQ(before.records, 1u);
  EXPECT_EQ(before.keys[0].records_present(), 1u);
  EXPECT_EQ(inference.records(), 3u);
  EXPECT_EQ(inference.malformed_records(), 1u);
  EXPECT_EQ(inference.schema().keys[0].records_present(), 2u);
}

// The point of the proposal: the specs parse the very records they were inferred from.
TEST(SchemaInferenceTest, ProposedSpecsParseTheRecords) {
  std::mt19937 rng(1234);
  std::vector<std::string> records;
  for (int i = 0; i < 200; ++i) {
    Features f;
    f["id"] = Feature::Int64s({i});
    f["embedding"] = Feature::Floats(std::vector<float>(8, 0.25f * i));
    f["jpeg"] = Feature::Bytes({std::string(rng() % 100, 'j')});
    f["boxes"] = Feature::Floats(std::vector<float>(4 * (rng() % 3)));
    if (rng() % 4 != 0) f["caption"] = Feature::Bytes({"a", "bc"});
    if (i == 17) f["pairs"] = Feature::Int64s({1, 2});
    if (i != 30)
      f["score"] = Feature::Floats({0.5f});
    else
      f["score"] = Feature{};  // an empty Feature counts as missing
    records.push_back(SerializeExample(f));
  }
  Schema schema = Infer(records);
  std::vector<FeatureSpec> specs = schema.ProposeSpecs();
  ASSERT_EQ(specs.size(), 7u);
  auto spec_of = [&](std::string_view key) -> const FeatureSpec& {
    for (const FeatureSpec& s : specs) {
      if (s.key == key) return s;
    }
    ADD_FAILURE() << "no spec for " << key;
    return specs[0];
  };
  EXPECT_EQ(spec_of("id").kind, FeatureSpec::Kind::kFixedLen);
  EXPECT_EQ(spec_of("embedding").shape, std::vector<int64_t>{8});
  EXPECT_EQ(spec_of("jpeg").kind, FeatureSpec::Kind::kFixedLen);
  EXPECT_EQ(spec_of("boxes").kind, FeatureSpec::Kind::kVarLen);
  EXPECT_EQ(spec_of("caption").kind, FeatureSpec::Kind::kVarLen);
  EXPECT_EQ(spec_of("pairs").kind, FeatureSpec::Kind::kVarLen);
  EXPECT_EQ(spec_of("score").kind, FeatureSpec::Kind::kVarLen);

  Result<ExampleParser> parser = ExampleParser::Create(specs);
  ASSERT_TRUE(parser.ok()) << parser.status().ToString();
  std::vector<std::span<const std::byte>> spans;
  for (const std::string& r : records) spans.push_back(Bytes(r));
  std::vector<Column> columns;
  Status status = parser->Parse(spans, &columns);
  ASSERT_TRUE(status.ok()) << status.ToString();
  ASSERT_EQ(columns.size(), specs.size());
  // And the statistics agree with what the parser extracted.
  for (size_t k = 0; k < specs.size(); ++k) {
    const KeyStats* stats = Find(schema, specs[k].key);
    ASSERT_NE(stats, nullptr);
    EXPECT_EQ(static_cast<uint64_t>(columns[k].num_values()), stats->total_values) << specs[k].key;
    if (specs[k].dtype == DType::kBytes) {
      EXPECT_EQ(columns[k].bytes_data.size(), stats->total_value_bytes) << specs[k].key;
    }
  }
}

// Arbitrary bytes and damaged Examples never crash and never break the accounting; a record
// is malformed exactly when ParseExample rejects it.
TEST(SchemaInferenceTest, DamagedRecordsAgreeWithParseExample) {
  std::mt19937 rng(42);
  Features f;
  f["label"] = Feature::Int64s({1, -2, 1LL << 40});
  f["xy"] = Feature::Floats({0.5f, 1.5f});
  f["text"] = Feature::Bytes({"hello", ""});
  const std::string valid = SerializeExample(f);
  SchemaInference inference;
  uint64_t rejected = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string record;
    if (i % 3 == 0) {
      record.resize(rng() % 64);
      for (char& c : record) c = static_cast<char>(rng());
    } else {
      record = valid;
      for (int flips = 1 + rng() % 3; flips > 0; --flips) {
        record[rng() % record.size()] = static_cast<char>(rng());
      }
      if (i % 3 == 2) record.resize(rng() % (record.size() + 1));
    }
    if (!ParseExample(Bytes(record)).ok()) ++rejected;
    inference.Add(Bytes(record));
  }
  Schema schema = inference.schema();
  EXPECT_EQ(schema.records, 3000u);
  EXPECT_EQ(schema.examples + schema.malformed_records, schema.records);
  EXPECT_EQ(schema.malformed_records, rejected);
  EXPECT_GT(rejected, 0u);
  EXPECT_GT(schema.examples, 0u);
  for (const KeyStats& key : schema.keys) {
    EXPECT_LE(key.records_present() + key.records_empty_feature, schema.examples) << key.key;
    EXPECT_LE(key.min_values, key.max_values) << key.key;
    EXPECT_LE(key.total_value_bytes, schema.total_record_bytes) << key.key;
  }
}

// The golden file: one tf.train.Example among raw payloads written by TensorFlow. Python's
// protobuf decodes records 0, 8 and 20 as empty Examples, 21 as the Example, and rejects the
// other 20.
TEST(SchemaInferenceTest, GoldenFileAgreesWithProtobuf) {
  Result<std::unique_ptr<format::RecordReader>> reader =
      format::RecordReader::Open(std::string(RF_TESTDATA_DIR) + "/golden/records.tfrecord");
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  SchemaInference inference;
  std::span<const std::byte> record;
  while (true) {
    Result<bool> more = (*reader)->ReadRecord(&record);
    ASSERT_TRUE(more.ok()) << more.status().ToString();
    if (!*more) break;
    inference.Add(record);
  }
  Schema schema = inference.schema();
  EXPECT_EQ(schema.records, 24u);
  EXPECT_EQ(schema.examples, 4u);
  EXPECT_EQ(schema.empty_examples, 3u);
  EXPECT_EQ(schema.malformed_records, 20u);
  EXPECT_EQ(schema.first_malformed_record, 1u);  // b"\x00": field number 0
  EXPECT_EQ(schema.max_record_bytes, 65543u);
  EXPECT_EQ(schema.min_record_bytes, 0u);
  EXPECT_EQ(Keys(schema),
            (std::vector<std::string>{"empty", "floats", "image/class/label", "image/class/text",
                                      "image/encoded", "image/format", "image/height",
                                      "image/width", "ints"}));
  const KeyStats* ints = Find(schema, "ints");
  ASSERT_NE(ints, nullptr);
  EXPECT_EQ(ints->max_values, 4u);
  EXPECT_DOUBLE_EQ(schema.presence(*ints), 0.25);  // 1 of 4 well-formed Examples
  const KeyStats* encoded = Find(schema, "image/encoded");
  ASSERT_NE(encoded, nullptr);
  EXPECT_EQ(encoded->total_value_bytes, 23u);  // b"\xff\xd8\xff\xe0not-really-a-jpeg\xff\xd9"
  const KeyStats* empty = Find(schema, "empty");
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(empty->kinds(), std::vector<ListKind>{ListKind::kBytes});
  EXPECT_EQ(empty->max_values, 0u);
}

}  // namespace
}  // namespace recordflow::example
