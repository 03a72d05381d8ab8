// Adversarial inputs for the format layer that record_corruption_test.cc does not already
// cover: decompression bombs, files that change while they are read, and truncation at every
// record boundary of a real file on disk. See docs/reliability.md for the whole catalogue.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "recordflow/format/compression.h"
#include "recordflow/format/record_reader.h"
#include "recordflow/format/record_test_util.h"
#include "recordflow/format/record_writer.h"

namespace recordflow::format {
namespace {

using testing::Frame;
using testing::MakeTempDir;
using testing::ReadAll;
using testing::ReadAllFromMemory;
using testing::ReadAllResult;

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string Deflate(const std::string& data, Compression compression) {
  z_stream z{};
  const int bits = compression == Compression::kGzip ? MAX_WBITS + 16 : MAX_WBITS;
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, bits, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, data.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  ASSERT_TRUE(f.good());
}

void AppendFile(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::app);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  ASSERT_TRUE(f.good());
}

std::vector<std::string> NumberedPayloads(int n, size_t size) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    std::string p(size, static_cast<char>('a' + i % 26));
    p.replace(0, std::to_string(i).size(), std::to_string(i));
    out.push_back(p);
  }
  return out;
}

// 64 valid records of 1 MiB of zeros: 64 MiB that deflate to ~64 KiB (a ~1000:1 bomb).
std::string ZeroRecords() {
  return Frame(std::vector<std::string>(64, std::string(1 << 20, '\0')));
}

class BombTest : public ::testing::TestWithParam<std::tuple<Compression, Inflater>> {};

TEST_P(BombTest, OutputLimitIsResourceExhaustedAndKeepsEarlierRecords) {
  const auto [compression, inflater] = GetParam();
  if (inflater == Inflater::kIsal && !IsalInflaterAvailable()) GTEST_SKIP() << "no ISA-L";
  const std::string framed = ZeroRecords();
  const std::string packed = Deflate(framed, compression);
  ASSERT_LT(packed.size() * 500, framed.size());  // it really is a bomb

  constexpr uint64_t kLimit = 16 << 20;
  RecordReaderOptions options;
  options.inflater = inflater;
  auto reader = RecordReader::FromStream(
      NewMemoryInputStream(testing::Bytes(packed), compression, "bomb.tfrecord.gz", inflater,
                           kLimit),
      options, compression);
  int records = 0;
  std::span<const std::byte> record;
  Status status;
  while (true) {
    auto more = reader->ReadRecord(&record);
    if (!more.ok()) {
      status = more.status();
      break;
    }
    ASSERT_TRUE(*more) << "the stream ended before the limit";
    ASSERT_EQ(record.size(), size_t{1} << 20);
    for (std::byte b : record) ASSERT_EQ(b, std::byte{0});
    ++records;
  }
  EXPECT_EQ(status.code(), StatusCode::kResourceExhausted) << status.ToString();
  EXPECT_TRUE(Contains(status.message(), "bomb.tfrecord.gz")) << status.message();
  EXPECT_TRUE(Contains(status.message(), "max_decompressed_bytes")) << status.message();
  EXPECT_TRUE(Contains(status.message(), std::to_string(kLimit))) << status.message();
  // Records wholly under the limit came out intact, none past it. The reader reads ahead by
  // up to one (grown, 2 MiB) buffer, so it may stop up to two records before the limit.
  const int under_limit = static_cast<int>(kLimit / ((1 << 20) + kFramingOverhead));
  EXPECT_LE(records, under_limit);
  EXPECT_GE(records, under_limit - 2);
  // The error is sticky: no partial record appears afterwards.
  EXPECT_EQ(reader->ReadRecord(&record).status().code(), StatusCode::kResourceExhausted);
}

TEST_P(BombTest, LimitAppliesThroughOpenAndSkipStillWorksUnderIt) {
  const auto [compression, inflater] = GetParam();
  if (inflater == Inflater::kIsal && !IsalInflaterAvailable()) GTEST_SKIP() << "no ISA-L";
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/bomb.tfrecord";
  WriteFile(path, Deflate(ZeroRecords(), compression));
  RecordReaderOptions options;
  options.compression = compression;
  options.inflater = inflater;
  options.on_corruption = CorruptionPolicy::kSkip;  // a limit is not corruption: never skipped
  options.max_decompressed_bytes = 3 << 20;
  auto reader = RecordReader::Open(path, options);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  const ReadAllResult all = ReadAll(**reader);
  EXPECT_GE(all.records.size(), 1u);  // see the read-ahead note above
  EXPECT_LE(all.records.size(), 2u);
  EXPECT_EQ(all.status.code(), StatusCode::kResourceExhausted) << all.status.ToString();
  EXPECT_TRUE(Contains(all.status.message(), path)) << all.status.message();
  EXPECT_EQ(all.stats.records_skipped, 0u);

  std::span<const std::byte> record;

  // A stream exactly at the limit is fine: the limit is "more than", not "equal to".
  const std::string small = Frame({std::string(1000, '\0')});
  options.max_decompressed_bytes = small.size();
  WriteFile(path, Deflate(small, compression));
  auto exact = RecordReader::Open(path, options);
  ASSERT_TRUE(exact.ok());
  ASSERT_TRUE(*(*exact)->ReadRecord(&record));
  EXPECT_EQ(record.size(), 1000u);
  auto end = (*exact)->ReadRecord(&record);
  ASSERT_TRUE(end.ok()) << end.status().ToString();
  EXPECT_FALSE(*end);
}

INSTANTIATE_TEST_SUITE_P(
    Inflaters, BombTest,
    ::testing::Values(std::make_tuple(Compression::kGzip, Inflater::kZlib),
                      std::make_tuple(Compression::kZlib, Inflater::kZlib),
                      std::make_tuple(Compression::kGzip, Inflater::kIsal),
                      std::make_tuple(Compression::kZlib, Inflater::kIsal)));

TEST(AdversarialFileTest, TruncatedOnDiskAtEveryRecordBoundaryAndInside) {
  // Every cut of a real file: at a boundary the records before it read back and the file ends
  // cleanly; anywhere else the last record is kDataLoss naming path, offset and index.
  const std::vector<std::string> payloads = {"alpha", std::string(300, 'b'), "", "delta"};
  const std::string full = Frame(payloads);
  std::vector<size_t> boundaries = {0};
  for (const auto& p : payloads) boundaries.push_back(boundaries.back() + p.size() + 16);
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/cut.tfrecord";
  for (size_t cut = 0; cut < full.size(); ++cut) {
    WriteFile(path, full.substr(0, cut));
    auto reader = RecordReader::Open(path);
    ASSERT_TRUE(reader.ok());
    const ReadAllResult all = ReadAll(**reader);
    ASSERT_LE(all.records.size(), payloads.size()) << "cut " << cut;
    for (size_t i = 0; i < all.records.size(); ++i) {
      ASSERT_EQ(all.records[i], payloads[i]) << "cut " << cut;
    }
    const size_t got = all.records.size();
    const Status& status = all.status;
    const auto at = std::find(boundaries.begin(), boundaries.end(), cut);
    if (at != boundaries.end()) {
      EXPECT_TRUE(status.ok()) << "cut " << cut << ": " << status.ToString();
      EXPECT_EQ(got, static_cast<size_t>(at - boundaries.begin()));
    } else {
      const size_t index = std::upper_bound(boundaries.begin(), boundaries.end(), cut) -
                           boundaries.begin() - 1;
      EXPECT_EQ(status.code(), StatusCode::kDataLoss) << "cut " << cut;
      EXPECT_EQ(got, index) << "cut " << cut;
      EXPECT_TRUE(Contains(status.message(), path)) << status.message();
      EXPECT_TRUE(Contains(status.message(), "offset " + std::to_string(boundaries[index])))
          << "cut " << cut << ": " << status.message();
      EXPECT_TRUE(Contains(status.message(), "record index " + std::to_string(index)))
          << status.message();
    }
  }
}

TEST(AdversarialFileTest, FileTruncatedWhileReadIsDataLossAfterIntactRecords) {
  const auto payloads = NumberedPayloads(200, 10000);
  const std::string full = Frame(payloads);
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/shrinking.tfrecord";
  WriteFile(path, full);
  RecordReaderOptions options;
  options.buffer_size = 4096;  // so the reader has read little ahead when the file shrinks
  auto reader = RecordReader::Open(path, options);
  ASSERT_TRUE(reader.ok());
  std::span<const std::byte> record;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(*(*reader)->ReadRecord(&record));
    ASSERT_EQ(testing::ToString(record), payloads[i]);
  }
  // Another process truncates the file in the middle of record 100.
  const size_t record_size = 10000 + kFramingOverhead;
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(100 * record_size + 5000)), 0);
  int next = 10;
  Status status;
  while (true) {
    auto more = (*reader)->ReadRecord(&record);
    if (!more.ok()) {
      status = more.status();
      break;
    }
    ASSERT_TRUE(*more) << "a truncated file must not end silently";
    ASSERT_EQ(testing::ToString(record), payloads[next]) << "record " << next;
    ++next;
  }
  EXPECT_EQ(next, 100);
  EXPECT_EQ(status.code(), StatusCode::kDataLoss) << status.ToString();
  EXPECT_TRUE(Contains(status.message(), path)) << status.message();
  EXPECT_TRUE(Contains(status.message(), "offset " + std::to_string(100 * record_size)))
      << status.message();
  EXPECT_TRUE(Contains(status.message(), "record index 100")) << status.message();
}

TEST(AdversarialFileTest, FileGrowingWhileReadGivesTheSnapshotAtOpen) {
  // A writer appends whole records while a reader is in the middle of the file: the reader
  // returns exactly the records present at open, each intact, and never reports damage that is
  // not there. (It used to read past the size it had checked lengths against and report the
  // appended records as truncated.)
  const auto first = NumberedPayloads(50, 3000);
  const auto more = NumberedPayloads(80, 3000);
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/growing.tfrecord";
  WriteFile(path, Frame(first));
  RecordReaderOptions options;
  options.buffer_size = 4096;
  auto reader = RecordReader::Open(path, options);
  ASSERT_TRUE(reader.ok());
  std::span<const std::byte> record;
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(*(*reader)->ReadRecord(&record));
  AppendFile(path, Frame(more));
  size_t n = 20;
  while (true) {
    auto next = (*reader)->ReadRecord(&record);
    ASSERT_TRUE(next.ok()) << "record " << n << ": " << next.status().ToString();
    if (!*next) break;
    const std::string& want = n < first.size() ? first[n] : more[n - first.size()];
    ASSERT_EQ(testing::ToString(record), want) << "record " << n;
    ++n;
  }
  EXPECT_EQ(n, first.size());
  // A new reader sees everything.
  auto again = RecordReader::Open(path);
  ASSERT_TRUE(again.ok());
  size_t total = 0;
  while (*(*again)->ReadRecord(&record)) ++total;
  EXPECT_EQ(total, first.size() + more.size());
}

TEST(AdversarialFileTest, ZeroByteFilesOfEveryCompressionHaveNoRecords) {
  const std::string dir = MakeTempDir();
  for (const char* name : {"/empty.tfrecord", "/empty.tfrecord.gz", "/empty.tfrecord.zz"}) {
    const std::string path = dir + name;
    WriteFile(path, "");
    auto reader = RecordReader::Open(path);
    ASSERT_TRUE(reader.ok()) << name;
    std::span<const std::byte> record;
    auto more = (*reader)->ReadRecord(&record);
    ASSERT_TRUE(more.ok()) << name << ": " << more.status().ToString();
    EXPECT_FALSE(*more) << name;
  }
}

TEST(AdversarialFileTest, UnreadableFileIsPermissionDeniedNamingIt) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files whatever their mode";
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/secret.tfrecord";
  WriteFile(path, Frame({"x"}));
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  auto reader = RecordReader::Open(path);
  EXPECT_EQ(reader.status().code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(Contains(reader.status().message(), path));
}

TEST(AdversarialFileTest, DiskFullWhileRewritingKeepsTheOldFileIntact) {
  // RecordWriterTest.DiskFullIsResourceExhausted shows a new file never appears; here a good
  // file already sits under the name and the rewrite runs out of space (RLIMIT_FSIZE): the
  // old records must survive untouched, and no temp file may be left behind.
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/data.tfrecord";
  const auto old_payloads = NumberedPayloads(20, 100);
  WriteFile(path, Frame(old_payloads));
  auto writer = RecordWriter::Open(path);
  ASSERT_TRUE(writer.ok());
  struct rlimit old_limit;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  struct rlimit limit = old_limit;
  limit.rlim_cur = 50000;
  signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);
  Status s;
  for (int i = 0; i < 200 && s.ok(); ++i) {
    s = (*writer)->WriteRecord(testing::Bytes(std::string(1000, 'n')));
  }
  if (s.ok()) s = (*writer)->Close();
  setrlimit(RLIMIT_FSIZE, &old_limit);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "data.tfrecord")) << s.message();
  writer->reset();
  auto reread = ReadAllFromMemory([&] {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }());
  EXPECT_TRUE(reread.status.ok()) << reread.status.ToString();
  EXPECT_EQ(reread.records, old_payloads);
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1) << "a temp file was left behind";
}

}  // namespace
}  // namespace recordflow::format
