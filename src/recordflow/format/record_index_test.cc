#include "recordflow/format/record_index.h"

#include <initializer_list>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "recordflow/format/record_test_util.h"
#include "recordflow/format/record_writer.h"
#include "recordflow/io/file.h"

namespace recordflow::format {
namespace {

using testing::Bytes;
using testing::MakeTempDir;
using testing::ToString;

// `status` is kDataLoss, and its message names each of `wanted` (the path, line, record, ...).
void ExpectDataLossNaming(const Status& status, std::initializer_list<std::string> wanted) {
  EXPECT_EQ(status.code(), StatusCode::kDataLoss) << status.ToString();
  for (const std::string& w : wanted) {
    EXPECT_NE(status.message().find(w), std::string::npos)
        << "'" << w << "' not in: " << status.message();
  }
}

std::vector<std::string> Payloads(int n) {
  std::vector<std::string> p;
  for (int i = 0; i < n; ++i)
    p.push_back(std::string(static_cast<size_t>(i * 37 % 500), 'a' + i % 26));
  return p;
}

std::string WriteWithIndex(const std::vector<std::string>& payloads) {
  std::string path = MakeTempDir() + "/d.tfrecord";
  RecordWriterOptions o;
  o.write_index = true;
  o.buffer_size = 4096;
  auto writer = RecordWriter::Open(path, o);
  EXPECT_TRUE(writer.ok());
  for (const auto& p : payloads) EXPECT_TRUE((*writer)->WriteRecord(Bytes(p)).ok());
  EXPECT_TRUE((*writer)->Close().ok());
  return path;
}

TEST(RecordIndexTest, WriterIndexEqualsBuiltIndexAndDaliFormat) {
  auto payloads = Payloads(200);
  std::string path = WriteWithIndex(payloads);
  auto from_writer = ReadIndexFile(path + ".idx");
  ASSERT_TRUE(from_writer.ok()) << from_writer.status().ToString();
  auto built = BuildIndex(path);
  ASSERT_TRUE(built.ok());
  EXPECT_EQ(*from_writer, *built);
  ASSERT_EQ(built->size(), payloads.size());
  uint64_t offset = 0;
  for (size_t i = 0; i < payloads.size(); ++i) {
    EXPECT_EQ((*built)[i].offset, offset);
    EXPECT_EQ((*built)[i].size, payloads[i].size() + 16);
    offset += payloads[i].size() + 16;
  }
  auto text = io::ReadFileToString(path + ".idx");
  EXPECT_EQ(text->substr(0, text->find('\n', text->find('\n') + 1) + 1), "0 16\n16 53\n");
}

TEST(RecordIndexTest, RandomAccessFromManyThreads) {
  auto payloads = Payloads(300);
  std::string path = WriteWithIndex(payloads);
  auto reader = IndexedRecordReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  ASSERT_EQ((*reader)->size(), payloads.size());
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::byte> scratch;
      for (size_t i = t; i < payloads.size(); i += 3) {
        auto rec = (*reader)->ReadRecord(payloads.size() - 1 - i, &scratch);
        if (!rec.ok() || ToString(*rec) != payloads[payloads.size() - 1 - i]) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  std::vector<std::byte> scratch;
  EXPECT_EQ((*reader)->ReadRecord(300, &scratch).status().code(), StatusCode::kOutOfRange);
}

TEST(RecordIndexTest, StaleIndexDetected) {
  auto payloads = Payloads(10);
  std::string path = WriteWithIndex(payloads);
  // An index whose sizes are shifted by one record.
  auto entries = *ReadIndexFile(path + ".idx");
  std::swap(entries[3].size, entries[4].size);
  entries[4].offset = entries[3].offset + entries[3].size;
  auto reader = IndexedRecordReader::Open(path, entries);
  ASSERT_TRUE(reader.ok());
  std::vector<std::byte> scratch;
  auto rec = (*reader)->ReadRecord(3, &scratch);
  ExpectDataLossNaming(rec.status(), {"record index 3"});
  // An index pointing past the end of the file is refused at open.
  entries.push_back({1u << 20, 100});
  EXPECT_EQ(IndexedRecordReader::Open(path, entries).status().code(), StatusCode::kDataLoss);
}

// Found by fuzz/index_fuzzer in CI: an entry in the middle whose offset + size wraps around 64
// bits made the next entry look non-overlapping, passed the end-of-file check (made on the last
// entry only) and then asked ReadRecord for a 2^64 - 1 byte buffer (std::length_error).
TEST(RecordIndexTest, EntriesWhoseEndOverflowsAreRefused) {
  auto parsed = ParseIndex("0 17\n149 18446744073709551615\n1165 18\n", "x.idx");
  ASSERT_FALSE(parsed.ok());
  ExpectDataLossNaming(parsed.status(), {"line 2", "overflow"});

  // The same entries handed to Open directly, bypassing ParseIndex, are refused at open too.
  auto payloads = Payloads(10);
  std::string path = WriteWithIndex(payloads);
  auto entries = *ReadIndexFile(path + ".idx");
  entries[4].size = UINT64_MAX;
  auto opened = IndexedRecordReader::Open(path, entries);
  ASSERT_FALSE(opened.ok());
  ExpectDataLossNaming(opened.status(), {"record 4"});
  entries = *ReadIndexFile(path + ".idx");
  entries[2].offset = UINT64_MAX - 8;
  EXPECT_EQ(IndexedRecordReader::Open(path, entries).status().code(), StatusCode::kDataLoss);
  entries = *ReadIndexFile(path + ".idx");
  entries[1].size = 3;
  EXPECT_EQ(IndexedRecordReader::Open(path, entries).status().code(), StatusCode::kDataLoss);
}

TEST(RecordIndexTest, MalformedIndexNamesTheLine) {
  auto bad = ParseIndex("0 16\n16 20\nbanana\n", "x.idx");
  ASSERT_FALSE(bad.ok());
  ExpectDataLossNaming(bad.status(), {"line 3"});
  EXPECT_FALSE(ParseIndex("0 8\n", "x.idx").ok()) << "size under 16";
  EXPECT_FALSE(ParseIndex("0 100\n50 20\n", "x.idx").ok()) << "overlap";
  EXPECT_FALSE(ParseIndex("0 16 7\n", "x.idx").ok()) << "trailing junk";
  auto ok = ParseIndex("0 16\r\n\n16 20\n", "x.idx");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->size(), 2u);
}

TEST(RecordIndexTest, CompressedFilesCannotBeIndexed) {
  std::string path = MakeTempDir() + "/c.tfrecord.gz";
  auto writer = RecordWriter::Open(path);
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->Close().ok());
  EXPECT_EQ(BuildIndex(path).status().code(), StatusCode::kInvalidArgument);
}

TEST(RecordIndexTest, IndexThatDoesNotCoverTheFileExactlyIsRefused) {
  // Entries within the file but too few (a partial index, or one of an older, shorter version
  // of the file) used to open fine and give 5 of 10 records with no error.
  const std::string path = WriteWithIndex(Payloads(10));
  const auto entries = *ReadIndexFile(path + ".idx");
  for (size_t kept : {size_t{0}, size_t{5}, size_t{9}}) {
    std::vector<IndexEntry> part(entries.begin(), entries.begin() + static_cast<long>(kept));
    auto r = IndexedRecordReader::Open(path, part);
    ASSERT_FALSE(r.ok()) << kept << " of 10 entries were trusted";
    ExpectDataLossNaming(r.status(), {path, "stale or incomplete"});
  }
  // A gap: entry 3 left out.
  std::vector<IndexEntry> gap = entries;
  gap.erase(gap.begin() + 3);
  EXPECT_EQ(IndexedRecordReader::Open(path, gap).status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(IndexedRecordReader::Open(path, entries).ok());
}

}  // namespace
}  // namespace recordflow::format
