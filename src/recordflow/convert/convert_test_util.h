// Helpers shared by the tests of convert, extract and the input sources: a fixture that owns a
// fresh folder per test, image Examples written to and read from TFRecord files, small JPEGs,
// and a child process with a file size limit (a full disk, as write(2) sees it).
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "recordflow/convert/convert.h"
#include "recordflow/example/example.h"
#include "recordflow/format/record_reader.h"
#include "recordflow/format/record_writer.h"
#include "recordflow/image/image.h"
#include "recordflow/image/image_test_util.h"
#include "recordflow/io/file.h"

namespace recordflow::convert::testing_util {

// A test that works in its own folder `root_`, named after the suite, the process and the test
// (so parallel ctest processes never share one), created empty and removed afterwards.
class TempFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = std::filesystem::temp_directory_path() /
            ("rf_" + std::string(info->test_suite_name()) + "_" + std::to_string(::getpid()) + "_" +
             info->name());
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  // `data` as the whole of file `p`, creating its folders.
  static void Write(const std::filesystem::path& p, const std::string& data) {
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << data;
  }

  // Convert of `root_/src` into `root_/dst`.
  Result<ConvertSummary> ConvertFolder(const std::string& src, const std::string& dst,
                                       const ConvertOptions& options) {
    return Convert((root_ / src).string(), (root_ / dst).string(), options);
  }

  std::filesystem::path root_;
};

// Options for a test's Convert: no fsync (the tests do not survive power loss, and it is slow
// on a shared disk); everything else at its default.
inline ConvertOptions NoSyncOptions() {
  ConvertOptions options;
  options.sync = false;
  return options;
}

// A w x h RGB JPEG of a gradient that differs with `w`.
inline std::string GradientJpeg(int w, int h) {
  image::Image img = image::testing_util::BlankImage(w, h, 3);
  for (size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = static_cast<uint8_t>(i * 7 + w);
  return *image::EncodeJpeg(img);
}

// An image Example as extract reads it: the bytes, the file name and the class name.
inline example::Features ImageExample(const std::string& encoded, const std::string& filename,
                                      const std::string& class_text) {
  example::Features f;
  f["image/encoded"] = example::Feature::Bytes({encoded});
  f["image/filename"] = example::Feature::Bytes({filename});
  f["image/class/text"] = example::Feature::Bytes({class_text});
  return f;
}

// Writes `records` (serialized) as the uncompressed TFRecord file `path`; fails the test on
// any error.
inline void WriteExamples(const std::filesystem::path& path,
                          const std::vector<example::Features>& records) {
  auto w = format::RecordWriter::Open(path.string());
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  for (const auto& f : records) {
    const std::string rec = example::SerializeExample(f);
    ASSERT_TRUE((*w)->WriteRecord(std::as_bytes(std::span(rec.data(), rec.size()))).ok());
  }
  ASSERT_TRUE((*w)->Close().ok());
}

// Every record of the uncompressed TFRecord file `path`, parsed as an Example.
inline std::vector<example::Features> ReadExamples(const std::string& path) {
  std::vector<example::Features> out;
  auto reader = format::RecordReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status().ToString();
  if (!reader.ok()) return out;
  std::span<const std::byte> rec;
  while (*(*reader)->ReadRecord(&rec)) out.push_back(*example::ParseExample(rec));
  return out;
}

// Runs `fn` in a child process whose files may not grow past `max_file_bytes` (a full disk,
// as write(2) sees it: EFBIG). Returns the child's exit status: 0 when `fn` returned true, 1
// when false, 100 when the child did not exit normally.
template <typename Fn>
int RunWithFileSizeLimit(rlim_t max_file_bytes, Fn fn) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit = {max_file_bytes, max_file_bytes};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    ::_exit(fn() ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

}  // namespace recordflow::convert::testing_util
