// Example / SequenceExample decoding checked against records TensorFlow wrote.
//
// testdata/golden/examples.tfrecord holds Examples and SequenceExamples serialized by
// TensorFlow's protobuf (and a few encoded by hand for wire forms serializers never write);
// examples_manifest.txt lists the values TensorFlow's own parser decodes from each record (see
// make_examples.py and README.md there). These tests read the file with RecordReader and check
// ParseExample / ParseSequenceExample and the batch ExampleParser against the manifest, and that
// re-serializing what was parsed gives back equal records (and the very bytes, for records
// TensorFlow wrote in C++ protobuf's canonical order).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "recordflow/example/example.h"
#include "recordflow/example/parse.h"
#include "recordflow/format/record_test_util.h"

namespace recordflow::example {
namespace {

const std::string kGoldenDir = format::testing::GoldenDir();

using FeatureLists = std::map<std::string, std::vector<Feature>, std::less<>>;

// One record of examples_manifest.txt.
struct GoldenRecord {
  uint64_t index = 0;
  bool sequence = false;  // a SequenceExample (else an Example)
  uint64_t length = 0;
  bool canonical = false;  // the bytes are the canonical encoding of the values
  std::string source;
  Features features;  // an Example's features, or a SequenceExample's context
  FeatureLists feature_lists;
};

// ---- manifest parsing -------------------------------------------------------------------------

// "-" is empty; otherwise an even number of hex digits.
bool Unhex(const std::string& hex, std::string* out) {
  out->clear();
  if (hex == "-") return true;
  if (hex.size() % 2 != 0) return false;
  for (size_t i = 0; i < hex.size(); i += 2) {
    unsigned byte = 0;
    if (std::sscanf(hex.c_str() + i, "%2x", &byte) != 1) return false;
    out->push_back(static_cast<char>(byte));
  }
  return true;
}

// Reads "<kind> <count> <values...>" (the rest of a feature, context or step line).
bool ReadFeature(std::istringstream& in, Feature* f) {
  std::string kind;
  size_t count = 0;
  if (!(in >> kind >> count)) return false;
  std::string token;
  if (kind == "none") {
    *f = Feature{};
  } else if (kind == "int64") {
    *f = Feature::Int64s({});
  } else if (kind == "float32") {
    *f = Feature::Floats({});
  } else if (kind == "bytes") {
    *f = Feature::Bytes({});
  } else {
    return false;
  }
  for (size_t i = 0; i < count; ++i) {
    if (!(in >> token)) return false;
    if (kind == "int64") {
      f->int64s.push_back(std::stoll(token));
    } else if (kind == "float32") {
      uint32_t bits = static_cast<uint32_t>(std::stoul(token, nullptr, 16));
      float v;
      std::memcpy(&v, &bits, sizeof(v));
      f->floats.push_back(v);
    } else if (kind == "bytes") {
      std::string v;
      if (!Unhex(token, &v)) return false;
      f->bytes.push_back(std::move(v));
    } else {
      return false;  // a "none" feature with values
    }
  }
  return !(in >> token);  // nothing left on the line
}

std::vector<GoldenRecord> ParseManifest(const std::string& text) {
  std::vector<GoldenRecord> records;
  std::string list_key;
  size_t list_steps = 0;  // steps the current list declares
  format::testing::ForEachManifestLine(
      text, "examples_manifest.txt", [&](const std::string& what, std::istringstream& fields) {
        if (what != "record" && records.empty()) return false;
        std::string hex_key, key;
        if (what == "record") {
          GoldenRecord r;
          std::string kind;
          int canonical = 0;
          bool ok =
              static_cast<bool>(fields >> r.index >> kind >> r.length >> canonical >> r.source);
          ok = ok && (kind == "example" || kind == "sequence") && r.index == records.size();
          r.sequence = kind == "sequence";
          r.canonical = canonical == 1;
          records.push_back(std::move(r));
          return ok;
        }
        if (what == "feature" || what == "context") {
          GoldenRecord& r = records.back();
          Feature f;
          return (what == "context") == r.sequence && (fields >> hex_key) && Unhex(hex_key, &key) &&
                 ReadFeature(fields, &f) && r.features.emplace(key, std::move(f)).second;
        }
        if (what == "list") {
          GoldenRecord& r = records.back();
          return r.sequence && (fields >> hex_key >> list_steps) && Unhex(hex_key, &list_key) &&
                 r.feature_lists.emplace(list_key, std::vector<Feature>{}).second;
        }
        if (what == "step") {
          GoldenRecord& r = records.back();
          Feature f;
          auto it = r.feature_lists.find(list_key);
          const bool ok = it != r.feature_lists.end() && it->second.size() < list_steps &&
                          ReadFeature(fields, &f);
          if (ok) it->second.push_back(std::move(f));
          return ok;
        }
        if (what == "end") {
          for (const auto& [k, steps] : records.back().feature_lists) {
            if (k == list_key && steps.size() != list_steps) return false;
          }
          return true;
        }
        return false;
      });
  return records;
}

const std::vector<GoldenRecord>& Manifest() {
  static const std::vector<GoldenRecord> records = [] {
    return ParseManifest(format::testing::ReadTextOrFail(kGoldenDir + "/examples_manifest.txt"));
  }();
  return records;
}

// The records of examples.tfrecord, read with recordflow's reader.
const std::vector<std::string>& GoldenRecords() {
  static const std::vector<std::string> records =
      format::testing::ReadRecordsOrFail(kGoldenDir + "/examples.tfrecord");
  return records;
}

// ---- helpers ----------------------------------------------------------------------------------

std::span<const std::byte> AsBytes(const std::string& s) { return std::as_bytes(std::span(s)); }

std::string Hex(std::string_view s) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += kDigits[c >> 4];
    out += kDigits[c & 0xf];
  }
  return out.empty() ? "-" : out;
}

// A feature in the manifest's notation, for failure messages.
std::string Describe(const Feature& f) {
  std::ostringstream out;
  out << ListKindName(f.kind) << " " << f.size();
  for (int64_t v : f.int64s) out << " " << v;
  for (float v : f.floats) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    char buf[9];
    std::snprintf(buf, sizeof(buf), "%08x", bits);
    out << " " << buf;
  }
  for (const auto& v : f.bytes) out << " " << Hex(v);
  return out.str();
}

std::string Describe(const Features& features) {
  std::string out;
  for (const auto& [key, f] : features) out += "\n  " + Hex(key) + " " + Describe(f);
  return out;
}

std::string Describe(const FeatureLists& lists) {
  std::string out;
  for (const auto& [key, steps] : lists) {
    out += "\n  list " + Hex(key) + " " + std::to_string(steps.size());
    for (const auto& f : steps) out += "\n    step " + Describe(f);
  }
  return out;
}

// Feature::operator== compares floats bitwise, so NaNs with equal bits are equal.
void ExpectFeaturesEqual(const Features& got, const Features& want) {
  EXPECT_TRUE(got == want) << "got:" << Describe(got) << "\nwant:" << Describe(want);
}

void ExpectListsEqual(const FeatureLists& got, const FeatureLists& want) {
  EXPECT_TRUE(got == want) << "got:" << Describe(got) << "\nwant:" << Describe(want);
}

std::string Trace(const GoldenRecord& r) {
  return "record " + std::to_string(r.index) + " (" + (r.sequence ? "sequence" : "example") + ", " +
         r.source + ")";
}

// Runs `check` on each golden record with its manifest entry, traced with the entry; stops at
// the first fatal failure, as an ASSERT in a loop over the records would.
void ForEachGoldenRecord(
    const std::function<void(const GoldenRecord& want, const std::string& record)>& check) {
  const auto& manifest = Manifest();
  const auto& records = GoldenRecords();
  ASSERT_EQ(records.size(), manifest.size());
  for (size_t i = 0; i < records.size(); ++i) {
    SCOPED_TRACE(Trace(manifest[i]));
    check(manifest[i], records[i]);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// ---- tests ------------------------------------------------------------------------------------

TEST(GoldenExampleTest, ManifestDescribesEveryRecord) {
  const auto& manifest = Manifest();
  const auto& records = GoldenRecords();
  ASSERT_EQ(records.size(), manifest.size());
  ASSERT_GE(manifest.size(), 15u);
  size_t sequences = 0, canonical = 0, handmade = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    SCOPED_TRACE(Trace(manifest[i]));
    EXPECT_EQ(records[i].size(), manifest[i].length);
    sequences += manifest[i].sequence;
    canonical += manifest[i].canonical;
    handmade += manifest[i].source == "handmade";
  }
  // The file covers every kind of record the tests below distinguish.
  EXPECT_GE(sequences, 3u);
  EXPECT_GE(canonical, 5u);
  EXPECT_LT(canonical, manifest.size());
  EXPECT_GE(handmade, 3u);
}

TEST(GoldenExampleTest, ParsesAsTensorFlowDoes) {
  ASSERT_NO_FATAL_FAILURE(
      ForEachGoldenRecord([&](const GoldenRecord& want, const std::string& record) {
        if (want.sequence) {
          auto got = ParseSequenceExample(AsBytes(record));
          ASSERT_TRUE(got.ok()) << got.status().ToString();
          ExpectFeaturesEqual(got->context, want.features);
          ExpectListsEqual(got->feature_lists, want.feature_lists);
        } else {
          auto got = ParseExample(AsBytes(record));
          ASSERT_TRUE(got.ok()) << got.status().ToString();
          ExpectFeaturesEqual(*got, want.features);
        }
      }));
}

TEST(GoldenExampleTest, ReserializesToEqualRecords) {
  ASSERT_NO_FATAL_FAILURE(ForEachGoldenRecord([&](const GoldenRecord& want,
                                                  const std::string& record) {
    std::string again, from_manifest;
    if (want.sequence) {
      auto parsed = ParseSequenceExample(AsBytes(record));
      ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
      again = SerializeSequenceExample(*parsed);
      auto back = ParseSequenceExample(AsBytes(again));
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      ExpectFeaturesEqual(back->context, want.features);
      ExpectListsEqual(back->feature_lists, want.feature_lists);
      from_manifest = SerializeSequenceExample(SequenceExample{want.features, want.feature_lists});
    } else {
      auto parsed = ParseExample(AsBytes(record));
      ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
      again = SerializeExample(*parsed);
      auto back = ParseExample(AsBytes(again));
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      ExpectFeaturesEqual(*back, want.features);
      from_manifest = SerializeExample(want.features);
    }
    // The encoding depends on the values only, not on how the record spelled them.
    EXPECT_EQ(Hex(again), Hex(from_manifest));
    if (want.canonical) EXPECT_EQ(Hex(again), Hex(record));
  }));
}

// The batch parser sees the same values: every feature of every Example as VarLen, and as
// FixedLen of its exact size; a feature with no list has no values, and is missing to FixedLen.
TEST(GoldenExampleTest, BatchParserAgrees) {
  size_t checked = 0;
  ASSERT_NO_FATAL_FAILURE(ForEachGoldenRecord([&](const GoldenRecord& want,
                                                  const std::string& record) {
    if (want.sequence) return;
    std::vector<FeatureSpec> specs;
    std::vector<const Feature*> expected;
    for (const auto& [key, f] : want.features) {
      DType dtype = f.kind == ListKind::kFloat   ? DType::kFloat32
                    : f.kind == ListKind::kBytes ? DType::kBytes
                                                 : DType::kInt64;
      specs.push_back(FeatureSpec::VarLen(key, dtype));
      expected.push_back(&f);
    }
    if (specs.empty()) return;
    auto parser = ExampleParser::Create(specs);
    ASSERT_TRUE(parser.ok()) << parser.status().ToString();
    // Two copies of the record: the second row's offsets must start where the first ends.
    std::vector<std::span<const std::byte>> batch(2, AsBytes(record));
    std::vector<Column> columns;
    Status s = parser->Parse(batch, &columns);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(columns.size(), specs.size());
    for (size_t k = 0; k < specs.size(); ++k) {
      const Feature& f = *expected[k];
      const Column& c = columns[k];
      SCOPED_TRACE("key " + Hex(specs[k].key));
      const int64_t n = static_cast<int64_t>(f.size());
      ASSERT_EQ(c.row_splits, (std::vector<int64_t>{0, n, 2 * n}));
      for (int64_t row = 0; row < 2; ++row) {
        Feature got;
        got.kind = f.kind;
        for (int64_t j = row * n; j < (row + 1) * n; ++j) {
          if (f.kind == ListKind::kInt64) got.int64s.push_back(c.int64s[j]);
          if (f.kind == ListKind::kFloat) got.floats.push_back(c.floats[j]);
          if (f.kind == ListKind::kBytes) {
            got.bytes.push_back(c.bytes_data.substr(c.bytes_offsets[j],
                                                    c.bytes_offsets[j + 1] - c.bytes_offsets[j]));
          }
        }
        EXPECT_TRUE(got == f) << "got " << Describe(got) << ", want " << Describe(f);
      }
      ++checked;
    }
    // FixedLen of the exact size: the same values, dense.
    std::vector<FeatureSpec> fixed;
    for (size_t k = 0; k < specs.size(); ++k) {
      if (expected[k]->kind == ListKind::kNone) continue;
      fixed.push_back(FeatureSpec::FixedLen(specs[k].key, specs[k].dtype,
                                            {static_cast<int64_t>(expected[k]->size())}));
    }
    auto fixed_parser = ExampleParser::Create(fixed);
    ASSERT_TRUE(fixed_parser.ok()) << fixed_parser.status().ToString();
    s = fixed_parser->Parse(batch, &columns);
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (size_t k = 0; k < fixed.size(); ++k) {
      const Feature& f = want.features.find(fixed[k].key)->second;
      const Column& c = columns[k];
      ASSERT_EQ(c.shape, (std::vector<int64_t>{2, static_cast<int64_t>(f.size())}));
      ASSERT_EQ(c.num_values(), 2 * static_cast<int64_t>(f.size()));
      for (size_t row = 0; row < 2; ++row) {
        const size_t first = row * f.size();
        if (f.kind == ListKind::kInt64) {
          EXPECT_EQ(
              std::vector<int64_t>(c.int64s.begin() + first, c.int64s.begin() + first + f.size()),
              f.int64s);
        }
        if (f.kind == ListKind::kFloat && f.size() > 0) {
          EXPECT_EQ(
              0, std::memcmp(c.floats.data() + first, f.floats.data(), f.size() * sizeof(float)));
        }
        for (size_t j = 0; f.kind == ListKind::kBytes && j < f.size(); ++j) {
          EXPECT_EQ(c.bytes_data.substr(c.bytes_offsets[first + j], c.bytes_offsets[first + j + 1] -
                                                                        c.bytes_offsets[first + j]),
                    f.bytes[j]);
        }
      }
    }
    // A Feature with no list is missing to FixedLen: required fails, a default fills in.
    for (const auto& [key, f] : want.features) {
      if (f.kind != ListKind::kNone) continue;
      auto required = ExampleParser::Create({FeatureSpec::FixedLen(key, DType::kInt64)});
      ASSERT_TRUE(required.ok());
      s = required->Parse(batch, &columns);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
      auto with_default = ExampleParser::Create(
          {FeatureSpec::FixedLen(key, DType::kInt64, {2}, Feature::Int64s({-7}))});
      ASSERT_TRUE(with_default.ok());
      s = with_default->Parse(batch, &columns);
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(columns[0].int64s, (std::vector<int64_t>{-7, -7, -7, -7}));
    }
  }));
  EXPECT_GE(checked, 40u);
}

// SequenceExample.context is field 1, as Example.features is, and feature_lists (field 2) is an
// unknown field to Example: parsed as an Example, a SequenceExample is its context.
TEST(GoldenExampleTest, SequenceContextReadsAsExampleFeatures) {
  ASSERT_NO_FATAL_FAILURE(
      ForEachGoldenRecord([&](const GoldenRecord& want, const std::string& record) {
        if (!want.sequence) return;
        auto as_example = ParseExample(AsBytes(record));
        ASSERT_TRUE(as_example.ok()) << as_example.status().ToString();
        ExpectFeaturesEqual(*as_example, want.features);
      }));
}

}  // namespace
}  // namespace recordflow::example
