// ReadRecord(std::string*), whose large payloads bypass the reader's buffer, against
// ReadRecord(std::span*), the buffered reference: the same records, errors, skips, offsets and
// counts over intact, corrupted and truncated files, plain and compressed.
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "recordflow/format/record_reader.h"
#include "recordflow/format/record_test_util.h"

namespace recordflow::format {
namespace {

using testing::Bytes;
using testing::Deflate;
using testing::Frame;

// Everything a caller can observe after each call.
struct Trace {
  std::vector<std::string> records;
  std::vector<uint64_t> offsets;       // offset() after each record
  std::vector<uint64_t> last_offsets;  // last_record_offset() after each record
  std::string status;                  // the first error, or empty
  uint64_t records_read = 0;
  uint64_t skipped = 0;
  uint64_t bytes_skipped = 0;
  std::vector<std::string> events;

  bool operator==(const Trace&) const = default;
};

// Counts the stream's reads, for the test that the direct path is one read per record.
class CountingStream : public InputStream {
 public:
  CountingStream(std::unique_ptr<InputStream> inner, size_t* reads)
      : inner_(std::move(inner)), reads_(reads) {}
  Result<size_t> Read(std::span<std::byte> dst) override {
    ++*reads_;
    return inner_->Read(dst);
  }
  std::optional<uint64_t> remaining() const override { return inner_->remaining(); }
  const std::string& name() const override { return inner_->name(); }

 private:
  std::unique_ptr<InputStream> inner_;
  size_t* reads_;
};

Trace ReadTrace(const std::string& file, Compression compression, RecordReaderOptions options,
                bool into_string, size_t* reads = nullptr) {
  std::unique_ptr<InputStream> stream =
      NewMemoryInputStream(Bytes(file), compression, "mem.tfrecord");
  if (reads != nullptr) stream = std::make_unique<CountingStream>(std::move(stream), reads);
  auto reader = RecordReader::FromStream(std::move(stream), options, compression);
  Trace t;
  std::string buffer = "stale bytes from before";
  for (int i = 0; i < 100000; ++i) {
    std::span<const std::byte> view;
    Result<bool> more = into_string ? reader->ReadRecord(&buffer) : reader->ReadRecord(&view);
    if (!more.ok()) {
      t.status = more.status().ToString();
      // Once failed, always failed.
      Result<bool> again = into_string ? reader->ReadRecord(&buffer) : reader->ReadRecord(&view);
      EXPECT_FALSE(again.ok());
      break;
    }
    if (!*more) break;
    t.records.push_back(into_string ? buffer : testing::ToString(view));
    t.offsets.push_back(reader->offset());
    t.last_offsets.push_back(reader->last_record_offset());
  }
  t.records_read = reader->records_read();
  t.skipped = reader->corruption_stats().records_skipped;
  t.bytes_skipped = reader->corruption_stats().bytes_skipped;
  for (const CorruptionEvent& e : reader->corruption_stats().events) {
    t.events.push_back(std::to_string(e.offset) + "/" + std::to_string(e.record_index) + "/" +
                       std::to_string(e.bytes_skipped) + ": " + e.reason);
  }
  return t;
}

std::vector<std::string> MixedPayloads(std::mt19937& rng, int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    size_t len = 0;
    switch (rng() % 4) {
      case 0:
        len = rng() % 200;
        break;
      case 1:
        len = 2000 + rng() % 6000;
        break;  // above a small direct threshold
      case 2:
        len = 30000 + rng() % 40000;
        break;  // around the default threshold
      default:
        len = 100000 + rng() % 50000;
        break;  // an ImageNet JPEG's size
    }
    std::string p(len, '\0');
    for (auto& c : p) c = static_cast<char>(rng());
    out.push_back(std::move(p));
  }
  return out;
}

TEST(RecordDirectReadTest, IntactFilesGiveTheBufferedReadersRecordsAndOffsets) {
  std::mt19937 rng(7);
  for (int round = 0; round < 6; ++round) {
    const std::vector<std::string> payloads = MixedPayloads(rng, 60);
    const std::string plain = Frame(payloads);
    for (Compression c : {Compression::kNone, Compression::kGzip}) {
      const std::string file = c == Compression::kNone ? plain : Deflate(plain, c);
      for (size_t buffer : {size_t{4096}, size_t{64} << 10, size_t{1} << 20}) {
        for (size_t direct : {size_t{1}, size_t{1000}, size_t{32} << 10}) {
          RecordReaderOptions o;
          o.buffer_size = buffer;
          o.direct_read_bytes = direct;
          SCOPED_TRACE("round " + std::to_string(round) + " compression " +
                       std::to_string(static_cast<int>(c)) + " buffer " + std::to_string(buffer) +
                       " direct " + std::to_string(direct));
          const Trace reference = ReadTrace(file, c, o, false);
          ASSERT_EQ(reference.records, payloads);
          ASSERT_TRUE(reference.status.empty()) << reference.status;
          EXPECT_EQ(ReadTrace(file, c, o, true), reference);
        }
      }
    }
  }
}

// Flipped bytes (headers, payloads, footers) and cuts, under both policies: the string path
// reports the same errors, skips the same records and resynchronises at the same offsets.
TEST(RecordDirectReadTest, DamagedFilesGiveTheBufferedReadersErrorsAndSkips) {
  std::mt19937 rng(11);
  int direct_differs = 0;
  for (int round = 0; round < 120; ++round) {
    const std::vector<std::string> payloads = MixedPayloads(rng, 12);
    std::string plain = Frame(payloads);
    const int damage = static_cast<int>(rng() % 3);
    if (damage == 0 || damage == 2) {
      for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k) {
        plain[rng() % plain.size()] ^= static_cast<char>(1 + rng() % 255);
      }
    }
    if (damage >= 1) plain.resize(rng() % plain.size());
    for (Compression c : {Compression::kNone, Compression::kGzip}) {
      std::string file = c == Compression::kNone ? plain : Deflate(plain, c);
      // A cut inside the compressed stream: the inflater fails mid-record.
      if (c != Compression::kNone && round % 4 == 0) file.resize(rng() % file.size());
      for (CorruptionPolicy policy : {CorruptionPolicy::kRaise, CorruptionPolicy::kSkip}) {
        RecordReaderOptions o;
        o.buffer_size = (round % 2 == 0) ? size_t{64} << 10 : size_t{256} << 10;
        o.direct_read_bytes = (round % 3 == 0) ? 1 : size_t{32} << 10;
        o.on_corruption = policy;
        SCOPED_TRACE("round " + std::to_string(round) + " damage " + std::to_string(damage) +
                     " compression " + std::to_string(static_cast<int>(c)) + " skip " +
                     std::to_string(policy == CorruptionPolicy::kSkip));
        const Trace reference = ReadTrace(file, c, o, false);
        const Trace direct = ReadTrace(file, c, o, true);
        EXPECT_EQ(direct, reference);
        RecordReaderOptions off = o;
        off.direct_read_bytes = 0;
        direct_differs += ReadTrace(file, c, off, true) == reference ? 0 : 1;
      }
    }
  }
  EXPECT_EQ(direct_differs, 0);  // and the string path with direct reads off, the same
}

// The point of the direct path: after the first buffer, each large record is one read of its
// payload, footer and the next header, not a buffer refill plus a copy.
TEST(RecordDirectReadTest, LargeRecordsCostOneReadEach) {
  std::mt19937 rng(3);
  std::vector<std::string> payloads;
  for (int i = 0; i < 50; ++i) {
    std::string p(100000 + rng() % 20000, '\0');
    for (auto& c : p) c = static_cast<char>(rng());
    payloads.push_back(std::move(p));
  }
  const std::string file = Frame(payloads);
  RecordReaderOptions o;  // 1 MiB buffer, 32 KiB threshold
  size_t direct_reads = 0;
  const Trace direct = ReadTrace(file, Compression::kNone, o, true, &direct_reads);
  ASSERT_EQ(direct.records, payloads);
  // The first fill holds ~9 records; every later record is one read; one more finds the end.
  EXPECT_LE(direct_reads, payloads.size() - 8 + 2);
  EXPECT_GE(direct_reads, payloads.size() - 10);
  size_t span_reads = 0;
  EXPECT_EQ(ReadTrace(file, Compression::kNone, o, false, &span_reads).records, payloads);
  EXPECT_LT(span_reads, 10u);  // the buffered path: one read per MiB
}

}  // namespace
}  // namespace recordflow::format
