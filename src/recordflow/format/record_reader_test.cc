// Round trips through RecordWriter and RecordReader, over every compression and buffer size.
#include "recordflow/format/record_reader.h"

#include <signal.h>
#include <sys/resource.h>

#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "recordflow/format/record_test_util.h"
#include "recordflow/format/record_writer.h"
#include "recordflow/io/file.h"

namespace recordflow::format {
namespace {

using testing::Bytes;
using testing::Frame;
using testing::MakeTempDir;
using testing::ReadAllFromMemory;
using testing::ReadRecordsOrFail;
using testing::SamplePayloads;
using testing::ToString;

Status WriteFile(const std::string& path, const std::vector<std::string>& payloads,
                 RecordWriterOptions options = {}) {
  RF_ASSIGN_OR_RETURN(auto writer, RecordWriter::Open(path, options));
  for (const auto& p : payloads) RF_RETURN_IF_ERROR(writer->WriteRecord(Bytes(p)));
  return writer->Close();
}

TEST(RecordReaderTest, ReadsIndependentlyFramedBytes) {
  auto payloads = SamplePayloads();
  auto result = ReadAllFromMemory(Frame(payloads));
  ASSERT_TRUE(result.status.ok()) << result.status.ToString();
  EXPECT_EQ(result.records, payloads);
}

TEST(RecordReaderTest, EmptyFileHasNoRecords) {
  auto result = ReadAllFromMemory("");
  EXPECT_TRUE(result.status.ok());
  EXPECT_TRUE(result.records.empty());
}

TEST(RecordWriterTest, UncompressedOutputIsExactlyTheFraming) {
  std::string path = MakeTempDir() + "/a.tfrecord";
  auto payloads = SamplePayloads();
  ASSERT_TRUE(WriteFile(path, payloads).ok());
  EXPECT_EQ(*io::ReadFileToString(path), Frame(payloads));
}

struct Case {
  Compression compression;
  size_t buffer_size;
};

class RoundTrip : public ::testing::TestWithParam<Case> {};

TEST_P(RoundTrip, ManySizesAcrossBufferBoundaries) {
  std::mt19937 rng(1234);
  std::vector<std::string> payloads;
  for (int i = 0; i < 300; ++i) {
    size_t len = (i % 50 == 0) ? 20000 + rng() % 30000 : rng() % 300;
    std::string p(len, '\0');
    for (auto& c : p) c = static_cast<char>(rng());
    payloads.push_back(std::move(p));
  }
  std::string path = MakeTempDir() + "/r.tfrecord";
  RecordWriterOptions w;
  w.compression = GetParam().compression;
  w.buffer_size = GetParam().buffer_size;
  ASSERT_TRUE(WriteFile(path, payloads, w).ok());
  RecordReaderOptions r;
  r.compression = GetParam().compression;
  r.buffer_size = GetParam().buffer_size;
  EXPECT_EQ(ReadRecordsOrFail(path, r), payloads);
}

INSTANTIATE_TEST_SUITE_P(
    All, RoundTrip,
    ::testing::Values(Case{Compression::kNone, 4096}, Case{Compression::kNone, 1 << 20},
                      Case{Compression::kGzip, 4096}, Case{Compression::kGzip, 1 << 20},
                      Case{Compression::kZlib, 4096}, Case{Compression::kZlib, 1 << 20}));

TEST(RecordReaderTest, CompressionFromExtension) {
  std::string dir = MakeTempDir();
  auto payloads = SamplePayloads();
  ASSERT_TRUE(WriteFile(dir + "/a.tfrecord.gz", payloads).ok());
  ASSERT_TRUE(WriteFile(dir + "/a.tfrecord.zz", payloads).ok());
  EXPECT_EQ(ReadRecordsOrFail(dir + "/a.tfrecord.gz"), payloads);
  EXPECT_EQ(ReadRecordsOrFail(dir + "/a.tfrecord.zz"), payloads);
  // The gzip file really is gzip.
  auto raw = io::ReadFileToString(dir + "/a.tfrecord.gz");
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(static_cast<unsigned char>((*raw)[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>((*raw)[1]), 0x8b);
}

TEST(RecordReaderTest, LargeRecordGrowsBufferThenShrinks) {
  std::string dir = MakeTempDir();
  std::vector<std::string> payloads = {"small", std::string(5 << 20, 'L'), "after"};
  ASSERT_TRUE(WriteFile(dir + "/big.tfrecord", payloads).ok());
  RecordReaderOptions r;
  r.buffer_size = 4096;
  EXPECT_EQ(ReadRecordsOrFail(dir + "/big.tfrecord", r), payloads);
}

// buffer_bytes() is what the pipeline's memory account charges for an open file.
TEST(RecordReaderTest, BufferBytesFollowTheFileAndTheLargestRecord) {
  std::string dir = MakeTempDir();
  // A small file gets a buffer about its size, not buffer_size.
  ASSERT_TRUE(WriteFile(dir + "/small.tfrecord", {"a", "bc", std::string(10'000, 'x')}).ok());
  const uint64_t small_size = std::filesystem::file_size(dir + "/small.tfrecord");
  auto small = RecordReader::Open(dir + "/small.tfrecord");
  ASSERT_TRUE(small.ok());
  EXPECT_GE((*small)->buffer_bytes(), small_size);
  EXPECT_LE((*small)->buffer_bytes(), small_size + 4096);

  // A large file: buffer_size; a record past it grows the buffer, which shrinks back after.
  std::vector<std::string> payloads(300, std::string(4000, 's'));
  payloads.push_back(std::string(5 << 20, 'L'));
  payloads.push_back("after");
  ASSERT_TRUE(WriteFile(dir + "/big.tfrecord", payloads).ok());
  RecordReaderOptions o;
  o.buffer_size = 256 << 10;
  auto big = RecordReader::Open(dir + "/big.tfrecord", o);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ((*big)->buffer_bytes(), size_t{256} << 10);
  std::span<const std::byte> record;
  size_t largest = 0;
  for (size_t i = 0; i < payloads.size(); ++i) {
    ASSERT_TRUE(*(*big)->ReadRecord(&record));
    largest = std::max(largest, (*big)->buffer_bytes());
  }
  EXPECT_GE(largest, size_t{5} << 20);
  ASSERT_FALSE(*(*big)->ReadRecord(&record));
  EXPECT_EQ((*big)->buffer_bytes(), size_t{256} << 10);

  // A GZIP file adds the inflater: its 256 KiB input buffer and its state.
  ASSERT_TRUE(WriteFile(dir + "/big.tfrecord.gz", payloads).ok());
  auto gz = RecordReader::Open(dir + "/big.tfrecord.gz", o);
  ASSERT_TRUE(gz.ok());
  EXPECT_GE((*gz)->buffer_bytes(), (size_t{256} << 10) * 2 + (32 << 10));
}

TEST(RecordReaderTest, OffsetsAndCounts) {
  auto payloads = SamplePayloads();
  std::string data = Frame(payloads);
  auto reader = RecordReader::FromStream(NewMemoryInputStream(Bytes(data), Compression::kNone));
  std::span<const std::byte> rec;
  uint64_t expected_offset = 0;
  for (const auto& p : payloads) {
    ASSERT_TRUE(*reader->ReadRecord(&rec));
    EXPECT_EQ(reader->last_record_offset(), expected_offset);
    expected_offset += p.size() + kFramingOverhead;
    EXPECT_EQ(reader->offset(), expected_offset);
  }
  EXPECT_FALSE(*reader->ReadRecord(&rec));
  EXPECT_FALSE(*reader->ReadRecord(&rec)) << "end of file stays end of file";
  EXPECT_EQ(reader->records_read(), payloads.size());
}

TEST(RecordReaderTest, ChecksumsOffSkipsVerification) {
  std::string data = Frame({"abc"});
  data[data.size() - 1] ^= 0x55;  // payload CRC
  RecordReaderOptions o;
  o.verify_checksums = false;
  auto result = ReadAllFromMemory(data, o);
  EXPECT_TRUE(result.status.ok());
  EXPECT_EQ(result.records, std::vector<std::string>{"abc"});
}

TEST(RecordReaderTest, MissingFile) {
  auto reader = RecordReader::Open("/nonexistent/rf.tfrecord");
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), StatusCode::kNotFound);
}

TEST(RecordWriterTest, NothingUnderFinalNameUntilClose) {
  std::string dir = MakeTempDir();
  std::string path = dir + "/w.tfrecord";
  {
    auto writer = RecordWriter::Open(path);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->WriteRecord(Bytes(std::string("x"))).ok());
    ASSERT_TRUE((*writer)->Flush().ok());
    EXPECT_EQ(io::RandomAccessFile::Open(path).status().code(), StatusCode::kNotFound);
  }  // destroyed without Close(): discarded
  EXPECT_EQ(io::RandomAccessFile::Open(path).status().code(), StatusCode::kNotFound);
}

TEST(RecordWriterTest, WriteAfterCloseFails) {
  auto writer = RecordWriter::Open(MakeTempDir() + "/c.tfrecord");
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->Close().ok());
  EXPECT_TRUE((*writer)->Close().ok()) << "double close is harmless";
  EXPECT_EQ((*writer)->WriteRecord(Bytes(std::string("x"))).code(),
            StatusCode::kFailedPrecondition);
}

TEST(RecordWriterTest, IndexWithCompressionRejected) {
  RecordWriterOptions o;
  o.write_index = true;
  auto writer = RecordWriter::Open(MakeTempDir() + "/c.tfrecord.gz", o);
  EXPECT_EQ(writer.status().code(), StatusCode::kInvalidArgument);
}

TEST(RecordWriterTest, DiskFullIsResourceExhausted) {
  // /dev/full fails every write with ENOSPC; the atomic writer cannot create a temp file
  // in /dev, so write through a file size limit instead when possible.
  std::string path = MakeTempDir() + "/full.tfrecord";
  auto writer = RecordWriter::Open(path);
  ASSERT_TRUE(writer.ok());
  struct rlimit old;
  getrlimit(RLIMIT_FSIZE, &old);
  struct rlimit lim = old;
  lim.rlim_cur = 10000;
  signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
  Status s;
  for (int i = 0; i < 100 && s.ok(); ++i) s = (*writer)->WriteRecord(Bytes(std::string(1000, 'd')));
  if (s.ok()) s = (*writer)->Close();
  setrlimit(RLIMIT_FSIZE, &old);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("full.tfrecord"), std::string::npos);
  EXPECT_FALSE((*writer)->Close().ok());
  EXPECT_EQ(io::RandomAccessFile::Open(path).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace recordflow::format
