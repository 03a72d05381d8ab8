#include "recordflow/io/file.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace recordflow::io {
namespace {

std::string MakeTempDir() {
  std::string tmpl = ::testing::TempDir() + "rf_file_test_XXXXXX";
  char* dir = mkdtemp(tmpl.data());
  EXPECT_NE(dir, nullptr);
  return tmpl;
}

int CountEntries(const std::string& dir) {
  int n = 0;
  DIR* d = opendir(dir.c_str());
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") ++n;
  }
  closedir(d);
  return n;
}

TEST(AtomicFileWriterTest, FileAppearsOnlyOnCommit) {
  std::string dir = MakeTempDir();
  std::string path = dir + "/out.bin";
  auto writer = AtomicFileWriter::Create(path);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  ASSERT_TRUE((*writer)->Append(std::as_bytes(std::span("hello", 5))).ok());
  EXPECT_NE(access(path.c_str(), F_OK), 0) << "final name must not exist before commit";
  EXPECT_EQ(access((*writer)->temp_path().c_str(), F_OK), 0);
  ASSERT_TRUE((*writer)->Commit().ok());
  auto contents = ReadFileToString(path);
  ASSERT_TRUE(contents.ok());
  EXPECT_EQ(*contents, "hello");
  EXPECT_EQ(CountEntries(dir), 1) << "no temporary file may remain";
}

TEST(AtomicFileWriterTest, DestroyedWriterLeavesNothing) {
  std::string dir = MakeTempDir();
  {
    auto writer = AtomicFileWriter::Create(dir + "/out.bin");
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Append(std::as_bytes(std::span("partial", 7))).ok());
  }
  EXPECT_EQ(CountEntries(dir), 0);
}

TEST(AtomicFileWriterTest, ErrorsNameThePath) {
  auto writer = AtomicFileWriter::Create("/nonexistent-dir-rf/out.bin");
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), StatusCode::kNotFound);
  EXPECT_NE(writer.status().message().find("/nonexistent-dir-rf/out.bin"), std::string::npos);
}

TEST(RandomAccessFileTest, ReadsAtOffsetsAndReportsEof) {
  std::string dir = MakeTempDir();
  ASSERT_TRUE(WriteStringToFileAtomic(dir + "/f", "0123456789").ok());
  auto file = RandomAccessFile::Open(dir + "/f");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ((*file)->size(), 10u);
  std::byte buf[8];
  auto n = (*file)->ReadAt(6, buf);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 4u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(buf), 4), "6789");
}

TEST(RandomAccessFileTest, MissingFileAndDirectory) {
  EXPECT_EQ(RandomAccessFile::Open("/nonexistent-rf-file").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(RandomAccessFile::Open("/tmp").status().code(), StatusCode::kInvalidArgument);
}

TEST(RandomAccessFileTest, OffsetsPastWhatOffTHoldsReadAsEndOfFile) {
  // A damaged checkpoint or index can ask for any 64-bit offset: past the end is end of file,
  // not pread's EINVAL reported as an I/O error.
  std::string dir = MakeTempDir();
  ASSERT_TRUE(WriteStringToFileAtomic(dir + "/f", "0123456789").ok());
  auto file = RandomAccessFile::Open(dir + "/f");
  ASSERT_TRUE(file.ok());
  std::byte buf[4];
  for (uint64_t offset : {uint64_t{10}, uint64_t{1} << 40, uint64_t{1} << 63, ~uint64_t{0} - 2}) {
    auto n = (*file)->ReadAt(offset, buf);
    ASSERT_TRUE(n.ok()) << offset << ": " << n.status().ToString();
    EXPECT_EQ(*n, 0u) << offset;
  }
}

TEST(AtomicFileWriterTest, RefusesToReplaceANonRegularFile) {
  std::string dir = MakeTempDir();
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto writer = AtomicFileWriter::Create(fifo);
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(writer.status().message().find("FIFO"), std::string::npos) << writer.status().message();
  EXPECT_EQ(CountEntries(dir), 1);
}

}  // namespace
}  // namespace recordflow::io
