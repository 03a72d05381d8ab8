// Extract writes files whose names come from record contents: nothing may land outside the
// chosen folder, whatever the records say and whatever symlinks sit in that folder.
// (Names with "..", "/" and the like: ConvertTest.ExtractSanitizesNames and
// python/tests/test_convert.py::test_extract_contains_path_traversal.)
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "recordflow/convert/convert.h"
#include "recordflow/example/example.h"
#include "recordflow/format/record_writer.h"

namespace recordflow::convert {
namespace {

namespace fs = std::filesystem;

class ExtractSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("rf_extract_security_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "out");
    fs::create_directories(root_ / "outside");
    std::ofstream(root_ / "outside/victim.jpg") << "precious";
    auto w = format::RecordWriter::Open((root_ / "r.tfrecord").string());
    ASSERT_TRUE(w.ok());
    example::Features f;
    f["image/encoded"] = example::Feature::Bytes({"\xff\xd8 not really a jpeg"});
    f["image/filename"] = example::Feature::Bytes({"victim.jpg"});
    f["image/class/text"] = example::Feature::Bytes({"cls"});
    const std::string rec = example::SerializeExample(f);
    ASSERT_TRUE((*w)->WriteRecord(std::as_bytes(std::span(rec.data(), rec.size()))).ok());
    ASSERT_TRUE((*w)->Close().ok());
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string Victim() {
    std::ifstream in(root_ / "outside/victim.jpg");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  fs::path root_;
};

TEST_F(ExtractSecurityTest, SymlinkAtTheTargetFileIsNotWrittenThrough) {
  fs::create_directories(root_ / "out/cls");
  fs::create_symlink(root_ / "outside/victim.jpg", root_ / "out/cls/victim.jpg");
  for (bool overwrite : {false, true}) {
    ExtractOptions options;
    options.overwrite = overwrite;
    auto s = Extract({(root_ / "r.tfrecord").string()}, (root_ / "out").string(), options);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(s->images, 1u);
    EXPECT_EQ(Victim(), "precious") << "overwrite=" << overwrite;
    EXPECT_TRUE(fs::is_symlink(root_ / "out/cls/victim.jpg"));
  }
  // The image went to a new name beside the link instead.
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(root_ / "out/cls/victim-1.jpg")));
}

TEST_F(ExtractSecurityTest, SymlinkedClassFolderIsRefused) {
  fs::create_symlink(root_ / "outside", root_ / "out/cls");
  auto s = Extract({(root_ / "r.tfrecord").string()}, (root_ / "out").string());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("symlink"), std::string::npos) << s.status().message();
  EXPECT_EQ(Victim(), "precious");
  EXPECT_EQ(std::distance(fs::directory_iterator(root_ / "outside"), fs::directory_iterator()),
            1);
}

}  // namespace
}  // namespace recordflow::convert
