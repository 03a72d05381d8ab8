// LevelDB-style corruption tests: write records in memory, damage one region, and assert the
// exact error code, offset, record index and skip counts.
#include <gtest/gtest.h>

#include <zlib.h>

#include "recordflow/format/record_reader.h"
#include "recordflow/format/record_test_util.h"

namespace recordflow::format {
namespace {

using testing::Frame;
using testing::ReadAllFromMemory;

const std::vector<std::string> kPayloads = {"first", std::string(1000, 'b'), "third"};
constexpr size_t kRecord1 = 5 + kFramingOverhead;  // offset of record 1 (21)
constexpr size_t kRecord2 = kRecord1 + 1000 + 16;  // offset of record 2 (1037)

RecordReaderOptions Skip() {
  RecordReaderOptions o;
  o.on_corruption = CorruptionPolicy::kSkip;
  return o;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

struct Damage {
  const char* name;
  size_t position;  // byte to flip
  const char* reason;
};

class DamageTest : public ::testing::TestWithParam<Damage> {};

TEST_P(DamageTest, RaiseNamesOffsetAndIndex) {
  std::string data = Frame(kPayloads);
  data[GetParam().position] ^= 0x40;
  auto result = ReadAllFromMemory(data);
  EXPECT_EQ(result.status.code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(result.status.message(), "byte offset " + std::to_string(kRecord1)))
      << result.status.message();
  EXPECT_TRUE(Contains(result.status.message(), "record index 1")) << result.status.message();
  EXPECT_TRUE(Contains(result.status.message(), "mem.tfrecord")) << result.status.message();
  EXPECT_TRUE(Contains(result.status.message(), GetParam().reason)) << result.status.message();
  EXPECT_EQ(result.records, std::vector<std::string>{"first"});
}

TEST_P(DamageTest, SkipDropsExactlyTheDamagedRecord) {
  std::string data = Frame(kPayloads);
  data[GetParam().position] ^= 0x40;
  auto result = ReadAllFromMemory(data, Skip());
  ASSERT_TRUE(result.status.ok()) << result.status.ToString();
  EXPECT_EQ(result.records, (std::vector<std::string>{"first", "third"}));
  EXPECT_EQ(result.stats.records_skipped, 1u);
  EXPECT_EQ(result.stats.bytes_skipped, 1016u);
  ASSERT_EQ(result.stats.events.size(), 1u);
  EXPECT_EQ(result.stats.events[0].offset, kRecord1);
  EXPECT_EQ(result.stats.events[0].record_index, 1u);
  EXPECT_TRUE(Contains(result.stats.events[0].reason, GetParam().reason));
}

INSTANTIATE_TEST_SUITE_P(
    Regions, DamageTest,
    ::testing::Values(Damage{"Length", kRecord1 + 1, "length CRC mismatch"},
                      Damage{"LengthCrc", kRecord1 + 9, "length CRC mismatch"},
                      Damage{"Payload", kRecord1 + 12 + 500, "payload CRC mismatch"},
                      Damage{"PayloadCrc", kRecord2 - 2, "payload CRC mismatch"}),
    [](const auto& info) { return std::string(info.param.name); });

// The file cut `kept` bytes into record 2: raised, kDataLoss saying `what`, and returned for
// the caller's further checks; skipped, records 0 and 1 and the `kept` bytes skipped. Call under
// ASSERT_NO_FATAL_FAILURE.
void ExpectCutIntoRecord2(size_t kept, const std::string& what, Status* raised_status) {
  std::string data = Frame(kPayloads).substr(0, kRecord2 + kept);
  auto raised = ReadAllFromMemory(data);
  EXPECT_EQ(raised.status.code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(raised.status.message(), what));
  *raised_status = raised.status;
  auto skipped = ReadAllFromMemory(data, Skip());
  ASSERT_TRUE(skipped.status.ok());
  EXPECT_EQ(skipped.records.size(), 2u);
  EXPECT_EQ(skipped.stats.bytes_skipped, kept);
}

TEST(CorruptionTest, TruncatedPayload) {
  Status raised;
  ASSERT_NO_FATAL_FAILURE(ExpectCutIntoRecord2(14, "truncated record", &raised));
  EXPECT_TRUE(Contains(raised.message(), "byte offset " + std::to_string(kRecord2)));
  EXPECT_TRUE(Contains(raised.message(), "record index 2"));
}

TEST(CorruptionTest, TruncatedHeader) {
  Status raised;
  ASSERT_NO_FATAL_FAILURE(ExpectCutIntoRecord2(5, "truncated record header", &raised));
}

TEST(CorruptionTest, BadFirstHeaderHintsAtFormat) {
  std::string data = "this is plain text, not records at all";
  auto result = ReadAllFromMemory(data);
  EXPECT_EQ(result.status.code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(result.status.message(), "Is this a TFRecord file?"));
}

TEST(CorruptionTest, GzipFileReadAsPlainGetsGzipHint) {
  // Built with an explicit length: the literal's \x00 would end a plain char* copy at 3 bytes.
  const char kBytes[] = "\x1f\x8b\x08\x00 and then some compressed bytes";
  std::string data(kBytes, sizeof(kBytes) - 1);
  ASSERT_EQ(data.size(), 35u);
  auto result = ReadAllFromMemory(data);
  EXPECT_EQ(result.status.code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(result.status.message(), "compression=\"GZIP\""));
}

TEST(CorruptionTest, LengthPastEndOfFileIsNeverAllocated) {
  // A header with a valid CRC claiming 2^60 bytes: must be reported, not allocated.
  std::string data(kHeaderSize, '\0');
  EncodeHeader(reinterpret_cast<std::byte*>(data.data()), uint64_t{1} << 60);
  RecordReaderOptions o;
  o.max_record_size = uint64_t{1} << 62;
  auto result = ReadAllFromMemory(data, o);
  EXPECT_EQ(result.status.code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(result.status.message(), "truncated record"));
}

TEST(CorruptionTest, LengthNearTwoToThe64CannotOverflow) {
  // length + 16 would wrap around to a small number; it must still be a truncation.
  for (uint64_t length : {~uint64_t{0}, ~uint64_t{0} - 8, ~uint64_t{0} - 15}) {
    std::string data(kHeaderSize, '\0');
    EncodeHeader(reinterpret_cast<std::byte*>(data.data()), length);
    data += std::string(64, 'x');
    RecordReaderOptions o;
    o.max_record_size = ~uint64_t{0};
    auto result = ReadAllFromMemory(data, o);
    EXPECT_EQ(result.status.code(), StatusCode::kDataLoss) << length;
    auto skipped = ReadAllFromMemory(data, Skip());
    EXPECT_TRUE(skipped.status.ok());
    EXPECT_EQ(skipped.stats.bytes_skipped, data.size());
  }
}

TEST(CorruptionTest, ImpossibleLengthInPlainFileIsTruncationNotLimit) {
  std::string data = Frame({"ok"});
  std::string header(kHeaderSize, '\0');
  EncodeHeader(reinterpret_cast<std::byte*>(header.data()), uint64_t{1} << 40);
  data += header + "abc";
  auto result = ReadAllFromMemory(data);
  EXPECT_EQ(result.status.code(), StatusCode::kDataLoss) << result.status.ToString();
  auto skipped = ReadAllFromMemory(data, Skip());
  ASSERT_TRUE(skipped.status.ok());
  EXPECT_EQ(skipped.records, std::vector<std::string>{"ok"});
}

TEST(CorruptionTest, LengthOverLimitIsResourceExhausted) {
  std::string data = Frame({std::string(2000, 'z')});
  RecordReaderOptions o;
  o.max_record_size = 1000;
  auto result = ReadAllFromMemory(data, o);
  EXPECT_EQ(result.status.code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(Contains(result.status.message(), "max_record_size"));
}

TEST(CorruptionTest, LyingLengthInCompressedStreamIsBounded) {
  // In a compressed stream the file size says nothing about lengths: the reader must grow
  // its buffer only as bytes arrive, then report the truncation.
  std::string data(kHeaderSize, '\0');
  EncodeHeader(reinterpret_cast<std::byte*>(data.data()), uint64_t{500} << 20);
  data += std::string(1000, 'p');
  const std::string gz = testing::Deflate(data, Compression::kGzip);
  auto result = ReadAllFromMemory(gz, {}, Compression::kGzip);
  EXPECT_EQ(result.status.code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(result.status.message(), "decompressed stream"));
}

TEST(CorruptionTest, ErrorIsSticky) {
  std::string data = Frame(kPayloads);
  data[kRecord1 + 20] ^= 1;
  auto reader =
      RecordReader::FromStream(NewMemoryInputStream(testing::Bytes(data), Compression::kNone));
  std::span<const std::byte> rec;
  ASSERT_TRUE(*reader->ReadRecord(&rec));
  EXPECT_EQ(reader->ReadRecord(&rec).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(reader->ReadRecord(&rec).status().code(), StatusCode::kDataLoss);
}

TEST(CorruptionTest, ReporterSeesEveryEvent) {
  struct Collect : CorruptionReporter {
    std::vector<CorruptionEvent> events;
    void Report(const CorruptionEvent& e) override { events.push_back(e); }
  } reporter;
  std::string data = Frame({"a", "b", "c", "d"});
  data[17 + 12] ^= 1;      // payload of record 1 ("b")
  data[3 * 17 + 12] ^= 1;  // payload of record 3 ("d")
  RecordReaderOptions o = Skip();
  o.reporter = &reporter;
  auto result = ReadAllFromMemory(data, o);
  EXPECT_EQ(result.records, (std::vector<std::string>{"a", "c"}));
  ASSERT_EQ(reporter.events.size(), 2u);
  EXPECT_EQ(reporter.events[0].offset, 17u);
  EXPECT_EQ(reporter.events[0].record_index, 1u);
  EXPECT_EQ(reporter.events[1].offset, 51u);
  EXPECT_EQ(reporter.events[1].record_index, 3u);
}

// Every single damaged byte is detected (CRC32C catches all bursts up to 32 bits), and in
// skip mode what comes back is always an in-order subset of the originals.
TEST(CorruptionTest, EveryByteFlipIsDetected) {
  const std::string clean = Frame(kPayloads);
  for (size_t i = 0; i < clean.size(); ++i) {
    std::string data = clean;
    data[i] ^= 0xa5;
    auto raised = ReadAllFromMemory(data);
    ASSERT_EQ(raised.status.code(), StatusCode::kDataLoss) << "byte " << i;
    auto skipped = ReadAllFromMemory(data, Skip());
    ASSERT_TRUE(skipped.status.ok()) << "byte " << i << ": " << skipped.status.ToString();
    ASSERT_GE(skipped.stats.records_skipped, 1u) << "byte " << i;
    size_t j = 0;
    for (const auto& r : skipped.records) {
      while (j < kPayloads.size() && kPayloads[j] != r) ++j;
      ASSERT_LT(j, kPayloads.size()) << "byte " << i << " produced a record not written";
      ++j;
    }
    EXPECT_EQ(skipped.records.size() + skipped.stats.records_skipped, kPayloads.size())
        << "byte " << i;
  }
}

}  // namespace
}  // namespace recordflow::format

namespace recordflow::format {
namespace {

std::string GzipBytes(const std::string& data) {
  return testing::Deflate(data, Compression::kGzip);
}

class CompressedDamageTest : public ::testing::TestWithParam<Inflater> {};

TEST_P(CompressedDamageTest, TruncatedStreamNamesRecordOrIsSkipped) {
  std::vector<std::string> payloads;
  for (int i = 0; i < 50; ++i)
    payloads.push_back(std::string(3000, static_cast<char>('a' + i % 26)));
  std::string gz = GzipBytes(testing::Frame(payloads));
  std::string cut = gz.substr(0, gz.size() * 3 / 4);
  RecordReaderOptions raise;
  raise.inflater = GetParam();
  auto raised = ReadAllFromMemory(cut, raise, Compression::kGzip);
  EXPECT_EQ(raised.status.code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(raised.status.message(), "ends early")) << raised.status.message();
  EXPECT_TRUE(Contains(raised.status.message(), "of the decompressed stream (record index " +
                                                    std::to_string(raised.records.size()) + ")"))
      << raised.status.message();
  EXPECT_GT(raised.records.size(), 10u);

  RecordReaderOptions skip = Skip();
  skip.inflater = GetParam();
  auto skipped = ReadAllFromMemory(cut, skip, Compression::kGzip);
  ASSERT_TRUE(skipped.status.ok()) << skipped.status.ToString();
  EXPECT_EQ(skipped.records, raised.records) << "everything before the damage is kept";
  EXPECT_EQ(skipped.stats.records_skipped, 1u);
  ASSERT_EQ(skipped.stats.events.size(), 1u);
  EXPECT_TRUE(Contains(skipped.stats.events[0].reason, "rest of the file is skipped"));
}

// A flipped byte in a GZIP file either is reported as DataLoss or lies in a header field that
// no checksum covers (mtime, OS, reserved flags) and changes nothing: wrong records never
// come back.
TEST_P(CompressedDamageTest, EveryByteFlipInGzipIsDetectedOrHarmless) {
  const std::string gz = GzipBytes(testing::Frame(kPayloads));
  int detected = 0;
  for (size_t i = 0; i < gz.size(); ++i) {
    std::string data = gz;
    data[i] ^= 0x21;
    RecordReaderOptions o;
    o.inflater = GetParam();
    auto result = ReadAllFromMemory(data, o, Compression::kGzip);
    if (result.status.ok()) {
      ASSERT_LT(i, 10u) << "undetected damage past the gzip header, byte " << i;
      ASSERT_EQ(result.records, kPayloads) << "byte " << i;
      continue;
    }
    ++detected;
    ASSERT_EQ(result.status.code(), StatusCode::kDataLoss) << "byte " << i;
    RecordReaderOptions s = Skip();
    s.inflater = GetParam();
    auto skipped = ReadAllFromMemory(data, s, Compression::kGzip);
    ASSERT_TRUE(skipped.status.ok()) << "byte " << i << ": " << skipped.status.ToString();
    ASSERT_GE(skipped.stats.records_skipped, 1u) << "byte " << i;
  }
  EXPECT_GE(detected, static_cast<int>(gz.size()) - 10);
}

INSTANTIATE_TEST_SUITE_P(All, CompressedDamageTest,
                         ::testing::Values(Inflater::kZlib, Inflater::kIsal), [](const auto& info) {
                           return info.param == Inflater::kZlib ? std::string("zlib")
                                                                : std::string("isal");
                         });

}  // namespace
}  // namespace recordflow::format
