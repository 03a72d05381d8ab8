// Adversarial inputs for the format layer that record_corruption_test.cc does not already
// cover: decompression bombs, files that change while they are read, and truncation at every
// record boundary of a real file on disk. See docs/reliability.md for the whole catalogue.
//
// Over 600 lines: one catalogue, in the order of docs/reliability.md's table.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "recordflow/format/compression.h"
#include "recordflow/format/crc32c.h"
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

// At zlib's highest level, for the bombs' ratio.
std::string Deflate(const std::string& data, Compression compression) {
  return testing::Deflate(data, compression, 9, 9);
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
  auto reader = RecordReader::FromStream(NewMemoryInputStream(testing::Bytes(packed), compression,
                                                              "bomb.tfrecord.gz", inflater, kLimit),
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

INSTANTIATE_TEST_SUITE_P(Inflaters, BombTest,
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
      const size_t index =
          std::upper_bound(boundaries.begin(), boundaries.end(), cut) - boundaries.begin() - 1;
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

// Frames `payloads` as the file `name` of a fresh temporary folder (its path in `*path`) and
// opens it with a 4 KiB buffer, so that the reader has read little ahead of the record it returns
// when another process changes the file.
Result<std::unique_ptr<RecordReader>> WriteAndOpenWithSmallBuffer(
    const std::vector<std::string>& payloads, const std::string& name, std::string* path) {
  *path = MakeTempDir() + "/" + name;
  WriteFile(*path, Frame(payloads));
  RecordReaderOptions options;
  options.buffer_size = 4096;
  return RecordReader::Open(*path, options);
}

// Another process truncates a 200-record file (payloads of 10000 bytes) while it is read: the
// reader (a small buffer, so it has read little ahead) has read 10 records when the file is cut
// to 100 records and `extra_bytes` more. Every record before the cut must read back intact, then
// the reads end in kDataLoss naming the path, the offset and the index of record 100, which is
// stored in `*status` for the caller's further checks. Call under ASSERT_NO_FATAL_FAILURE.
void ExpectDataLossAfterTruncationWhileRead(size_t extra_bytes, Status* status) {
  const auto payloads = NumberedPayloads(200, 10000);
  std::string path;
  auto reader = WriteAndOpenWithSmallBuffer(payloads, "shrinking.tfrecord", &path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  const size_t record_size = 10000 + kFramingOverhead;
  std::span<const std::byte> record;
  int next = 0;
  while (true) {
    if (next == 10) {
      ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(100 * record_size + extra_bytes)), 0);
    }
    auto more = (*reader)->ReadRecord(&record);
    if (!more.ok()) {
      *status = more.status();
      break;
    }
    ASSERT_TRUE(*more) << "a file truncated while read ended cleanly after " << next
                       << " of 200 records";
    ASSERT_EQ(testing::ToString(record), payloads[next]) << "record " << next;
    ++next;
  }
  EXPECT_EQ(next, 100);
  EXPECT_EQ(status->code(), StatusCode::kDataLoss) << status->ToString();
  EXPECT_TRUE(Contains(status->message(), path)) << status->message();
  EXPECT_TRUE(Contains(status->message(), "offset " + std::to_string(100 * record_size)))
      << status->message();
  EXPECT_TRUE(Contains(status->message(), "record index 100")) << status->message();
}

TEST(AdversarialFileTest, FileTruncatedWhileReadIsDataLossAfterIntactRecords) {
  Status status;  // cut in the middle of record 100
  ASSERT_NO_FATAL_FAILURE(ExpectDataLossAfterTruncationWhileRead(5000, &status));
}

TEST(AdversarialFileTest, FileGrowingWhileReadGivesTheSnapshotAtOpen) {
  // A writer appends whole records while a reader is in the middle of the file: the reader
  // returns exactly the records present at open, each intact, and never reports damage that is
  // not there. (It used to read past the size it had checked lengths against and report the
  // appended records as truncated.)
  const auto first = NumberedPayloads(50, 3000);
  const auto more = NumberedPayloads(80, 3000);
  std::string path;
  auto reader = WriteAndOpenWithSmallBuffer(first, "growing.tfrecord", &path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
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

// --- Non-regular files -----------------------------------------------------------------------

TEST(NonRegularFileTest, FifoIsRefusedAtOnceNotWaitedOn) {
  const std::string dir = MakeTempDir();
  const std::string fifo = dir + "/records.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Without a writer, a blocking open of a FIFO waits forever; this thread plays the writer
  // after 2 s so that a reader that does block still returns (and the test fails on time).
  std::thread unblock([&] {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    int fd = ::open(fifo.c_str(), O_RDWR | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  });
  const auto start = std::chrono::steady_clock::now();
  auto reader = RecordReader::Open(fifo);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  unblock.join();
  EXPECT_LT(seconds, 1.0) << "opening a FIFO blocked";
  ASSERT_FALSE(reader.ok()) << "a FIFO was read as a (empty) record file";
  EXPECT_EQ(reader.status().code(), StatusCode::kInvalidArgument) << reader.status().ToString();
  EXPECT_TRUE(Contains(reader.status().message(), fifo)) << reader.status().message();
  EXPECT_TRUE(Contains(reader.status().message(), "FIFO")) << reader.status().message();
}

TEST(NonRegularFileTest, DevicesPipesAndProcFilesAreRefusedNotReadAsEmpty) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  ASSERT_EQ(::write(pipe_fds[1], "x", 1), 1);
  const std::string pipe_path = "/dev/fd/" + std::to_string(pipe_fds[0]);
  for (const std::string& path :
       {std::string("/dev/zero"), std::string("/dev/urandom"), std::string("/dev/null"),
        std::string("/proc/self/status"), pipe_path}) {
    auto reader = RecordReader::Open(path);
    ASSERT_FALSE(reader.ok()) << path << " was read as a record file";
    EXPECT_EQ(reader.status().code(), StatusCode::kInvalidArgument)
        << path << ": " << reader.status().ToString();
    EXPECT_TRUE(Contains(reader.status().message(), path)) << reader.status().message();
  }
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
}

TEST(NonRegularFileTest, WriterNeverReplacesAFifo) {
  const std::string dir = MakeTempDir();
  const std::string fifo = dir + "/out.tfrecord";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto writer = RecordWriter::Open(fifo);
  Status s = writer.ok() ? (*writer)->Close() : writer.status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), fifo)) << s.message();
  struct stat st;
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced by a regular file";
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1) << "a temp file was left behind";
}

// --- Files that change under the reader ------------------------------------------------------

TEST(AdversarialFileTest, FileTruncatedAtARecordBoundaryWhileReadIsDataLoss) {
  // Cut exactly between two records: the bytes left parse as a shorter valid file, so only
  // the size seen at open tells the reader that records are missing.
  Status status;
  ASSERT_NO_FATAL_FAILURE(ExpectDataLossAfterTruncationWhileRead(0, &status));
  EXPECT_TRUE(Contains(status.message(), "when opened")) << status.message();
}

// --- Allocation failure ----------------------------------------------------------------------

// Writes a GZIP file holding one valid record of `size` zero bytes (about size/1000 on disk).
void WriteGzipZeroRecord(const std::string& path, size_t size) {
  z_stream z{};
  ASSERT_EQ(deflateInit2(&z, 1, Z_DEFLATED, MAX_WBITS + 16, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out;
  std::string chunk_out(1 << 20, '\0');
  auto feed = [&](const std::string& in, int flush) {
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z.avail_in = static_cast<uInt>(in.size());
    do {
      z.next_out = reinterpret_cast<Bytef*>(chunk_out.data());
      z.avail_out = static_cast<uInt>(chunk_out.size());
      deflate(&z, flush);
      out.append(chunk_out.data(), chunk_out.size() - z.avail_out);
    } while (z.avail_out == 0);
  };
  std::byte header[kHeaderSize];
  EncodeHeader(header, size);
  feed(std::string(reinterpret_cast<const char*>(header), kHeaderSize), Z_NO_FLUSH);
  const std::string zeros(1 << 20, '\0');
  uint32_t crc = Crc32c({});
  for (size_t done = 0; done < size; done += zeros.size()) {
    crc = Crc32cExtend(crc, testing::Bytes(zeros));
    feed(zeros, Z_NO_FLUSH);
  }
  std::byte footer[kFooterSize];
  EncodeFixed32(footer, MaskCrc(crc));
  feed(std::string(reinterpret_cast<const char*>(footer), kFooterSize), Z_FINISH);
  deflateEnd(&z);
  WriteFile(path, out);
}

uint64_t AddressSpaceBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0;
  statm >> pages;
  return pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

TEST(AllocationFailureTest, HugeRecordUnderAnAddressSpaceLimitIsResourceExhausted) {
  if (testing::kUnderSanitizer) {
    GTEST_SKIP() << "sanitizers reserve terabytes of address space; RLIMIT_AS cannot apply";
  }
  // A 256 MiB record in a ~256 KiB GZIP file, read with 128 MiB of address space to spare:
  // the record buffer cannot be allocated. That must be an error, not std::bad_alloc
  // escaping (SIGABRT). Run in a child so the limit does not touch the rest of the suite.
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/huge.tfrecord.gz";
  constexpr size_t kRecord = size_t{256} << 20;
  WriteGzipZeroRecord(path, kRecord);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    struct rlimit limit;
    limit.rlim_cur = limit.rlim_max = AddressSpaceBytes() + (size_t{128} << 20);
    if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(10);
    try {
      auto reader = RecordReader::Open(path);
      if (!reader.ok()) _exit(11);
      std::span<const std::byte> record;
      auto got = (*reader)->ReadRecord(&record);
      if (got.ok()) _exit(12);  // read it after all: the limit did not bite
      const Status& s = got.status();
      if (s.code() != StatusCode::kResourceExhausted) _exit(13);
      if (!Contains(s.message(), path) || !Contains(s.message(), "record index 0")) _exit(14);
    } catch (const std::bad_alloc&) {
      _exit(15);  // escaped the reader: outside a test harness, std::terminate (SIGABRT)
    }
    _exit(0);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  ASSERT_FALSE(WIFSIGNALED(wstatus))
      << "killed by signal " << WTERMSIG(wstatus) << " (std::bad_alloc escaped?)";
  ASSERT_TRUE(WIFEXITED(wstatus));
  EXPECT_EQ(WEXITSTATUS(wstatus), 0) << "child check failed (see the _exit codes above)";
}

// --- Compressed streams: trailing bytes, several streams --------------------------------------

class CompressedTailTest : public ::testing::TestWithParam<Inflater> {
 protected:
  void SetUp() override {
    if (GetParam() == Inflater::kIsal && !IsalInflaterAvailable()) GTEST_SKIP() << "no ISA-L";
  }
  ReadAllResult Read(const std::string& data, Compression c,
                     CorruptionPolicy policy = CorruptionPolicy::kRaise) {
    RecordReaderOptions options;
    options.inflater = GetParam();
    options.on_corruption = policy;
    return ReadAllFromMemory(data, options, c);
  }
};

TEST_P(CompressedTailTest, GzipWithTrailingZerosKeepsEveryRecordThenDataLoss) {
  // TensorFlow returns every record, then DataLoss ("incorrect header check").
  for (int n : {2, 3000}) {
    const auto payloads = NumberedPayloads(n, 100);
    const std::string gz = Deflate(Frame(payloads), Compression::kGzip) + std::string(512, '\0');
    const ReadAllResult raise = Read(gz, Compression::kGzip);
    EXPECT_EQ(raise.records, payloads) << n << " records: got " << raise.records.size();
    EXPECT_EQ(raise.status.code(), StatusCode::kDataLoss) << raise.status.ToString();
    const ReadAllResult skip = Read(gz, Compression::kGzip, CorruptionPolicy::kSkip);
    EXPECT_TRUE(skip.status.ok()) << skip.status.ToString();
    EXPECT_EQ(skip.records, payloads) << n << " records: got " << skip.records.size();
    EXPECT_EQ(skip.stats.records_skipped, 1u);
    ASSERT_EQ(skip.stats.events.size(), 1u);
    EXPECT_EQ(skip.stats.events[0].record_index, static_cast<uint64_t>(n));
    EXPECT_EQ(skip.stats.events[0].bytes_skipped, 0u) << "no decompressed byte was lost";
  }
}

TEST_P(CompressedTailTest, ConcatenatedGzipMembersAreOneStream) {
  const auto a = NumberedPayloads(3, 50);
  const auto b = NumberedPayloads(4, 70);
  const ReadAllResult all =
      Read(Deflate(Frame(a), Compression::kGzip) + Deflate(Frame(b), Compression::kGzip),
           Compression::kGzip);
  EXPECT_TRUE(all.status.ok()) << all.status.ToString();
  std::vector<std::string> both = a;
  both.insert(both.end(), b.begin(), b.end());
  EXPECT_EQ(all.records, both);
}

TEST_P(CompressedTailTest, ZlibFollowedByAnotherStreamOrGarbageKeepsTheFirstStreamsRecords) {
  // TensorFlow reads a ZLIB file's first stream and ignores the rest; we return the same
  // records, then report the rest instead of ignoring it.
  const auto a = NumberedPayloads(3, 50);
  const auto b = NumberedPayloads(4, 70);
  const std::string first = Deflate(Frame(a), Compression::kZlib);
  for (const std::string& tail : {Deflate(Frame(b), Compression::kZlib),
                                  std::string("garbage!garbage!"), std::string(64, '\0')}) {
    const ReadAllResult raise = Read(first + tail, Compression::kZlib);
    EXPECT_EQ(raise.records, a) << "got " << raise.records.size();
    EXPECT_EQ(raise.status.code(), StatusCode::kDataLoss) << raise.status.ToString();
    EXPECT_TRUE(
        Contains(raise.status.message(), "compressed byte offset " + std::to_string(first.size())))
        << raise.status.message();
    const ReadAllResult skip = Read(first + tail, Compression::kZlib, CorruptionPolicy::kSkip);
    EXPECT_TRUE(skip.status.ok()) << skip.status.ToString();
    EXPECT_EQ(skip.records, a);
    EXPECT_EQ(skip.stats.records_skipped, 1u);
  }
}

TEST_P(CompressedTailTest, GzipTrailerCrcErrorIsReportedWhereTheStreamEnds) {
  // The trailer's CRC covers the whole member, so the error only shows at its end: every
  // record is returned and the event sits at the end of the decompressed stream, not at 0.
  const auto payloads = NumberedPayloads(20, 100);
  const std::string framed = Frame(payloads);
  std::string gz = Deflate(framed, Compression::kGzip);
  gz[gz.size() - 8] ^= 0x01;  // first byte of the trailer's CRC32
  const ReadAllResult skip = Read(gz, Compression::kGzip, CorruptionPolicy::kSkip);
  EXPECT_EQ(skip.records, payloads) << "got " << skip.records.size();
  ASSERT_EQ(skip.stats.events.size(), 1u);
  EXPECT_EQ(skip.stats.events[0].offset, framed.size());
  EXPECT_EQ(skip.stats.events[0].record_index, payloads.size());
  const ReadAllResult raise = Read(gz, Compression::kGzip);
  EXPECT_EQ(raise.records, payloads);
  EXPECT_EQ(raise.status.code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(raise.status.message(), "offset " + std::to_string(framed.size())))
      << raise.status.message();
}

INSTANTIATE_TEST_SUITE_P(Inflaters, CompressedTailTest,
                         ::testing::Values(Inflater::kZlib, Inflater::kIsal), [](const auto& info) {
                           return info.param == Inflater::kZlib ? "zlib" : "isal";
                         });

}  // namespace
}  // namespace recordflow::format
