// Extract writes files whose names come from record contents: nothing may land outside the
// chosen folder, whatever the records say and whatever symlinks sit in that folder.
// (Names with "..", "/" and the like: ConvertTest.ExtractSanitizesNames and
// python/tests/test_convert.py::test_extract_contains_path_traversal.)
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "recordflow/convert/convert.h"
#include "recordflow/convert/convert_test_util.h"

namespace recordflow::convert {
namespace {

namespace fs = std::filesystem;
using testing_util::ImageExample;
using testing_util::RunWithFileSizeLimit;
using testing_util::WriteExamples;

class ExtractSecurityTest : public testing_util::TempFolderTest {
 protected:
  void SetUp() override {
    TempFolderTest::SetUp();
    fs::create_directories(root_ / "out");
    Write(root_ / "outside/victim.jpg", "precious");
    WriteExamples(root_ / "r.tfrecord",
                  {ImageExample("\xff\xd8 not really a jpeg", "victim.jpg", "cls")});
  }

  std::string Victim() {
    std::ifstream in(root_ / "outside/victim.jpg");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
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
  EXPECT_EQ(std::distance(fs::directory_iterator(root_ / "outside"), fs::directory_iterator()), 1);
}

TEST_F(ExtractSecurityTest, OverwriteDoesNotWriteThroughAHardLink) {
  fs::create_directories(root_ / "out/cls");
  fs::create_hard_link(root_ / "outside/victim.jpg", root_ / "out/cls/victim.jpg");
  ExtractOptions options;
  options.overwrite = true;
  auto s = Extract({(root_ / "r.tfrecord").string()}, (root_ / "out").string(), options);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(Victim(), "precious");
  // The entry in OUT_DIR was replaced (a new file), not written through.
  std::ifstream in(root_ / "out/cls/victim.jpg");
  std::stringstream got;
  got << in.rdbuf();
  EXPECT_EQ(got.str(), "\xff\xd8 not really a jpeg");
  EXPECT_EQ(fs::hard_link_count(root_ / "outside/victim.jpg"), 1u);
}

TEST_F(ExtractSecurityTest, FullDiskLeavesNoTruncatedImage) {
  // An image larger than the file size limit (write(2) then fails with EFBIG, as on a full disk).
  WriteExamples(
      root_ / "big.tfrecord",
      {ImageExample(std::string("\xff\xd8") + std::string(20000, 'x'), "big.jpg", "cls")});
  const int code = RunWithFileSizeLimit(4096, [&] {
    return Extract({(root_ / "big.tfrecord").string()}, (root_ / "out").string()).ok();
  });
  EXPECT_EQ(code, 1);  // 100: the child did not exit normally
  // Neither the final name nor a temporary file is left.
  if (fs::exists(root_ / "out/cls")) {
    for (const auto& e : fs::directory_iterator(root_ / "out/cls")) ADD_FAILURE() << e.path();
  }
}

}  // namespace
}  // namespace recordflow::convert
