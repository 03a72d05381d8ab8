// Input sources: spooled items go through the same planner, writer and summary as a folder.
#include "recordflow/convert/input_source.h"

#include <filesystem>
#include <set>

#include <gtest/gtest.h>

#include "recordflow/convert/convert_test_util.h"
#include "recordflow/example/example.h"
#include "recordflow/io/file.h"

namespace recordflow::convert {
namespace {
namespace fs = std::filesystem;
using example::Feature;
using testing_util::GradientJpeg;
using testing_util::ReadExamples;

class SpooledSourceTest : public testing_util::TempFolderTest {
 protected:
  std::unique_ptr<SpooledSource> Source(std::optional<std::vector<std::string>> names) {
    auto source = SpooledSource::Create((root_ / "spool").string(), "<test>", std::move(names));
    EXPECT_TRUE(source.ok()) << source.status().ToString();
    return std::move(source).value();
  }
};

TEST_F(SpooledSourceTest, ItemsAreSplitShardedAndSummarizedByTheNativeConverter) {
  auto source = Source(std::vector<std::string>{"cat", "dog"});
  const std::string jpeg = GradientJpeg(20, 10);
  for (int i = 0; i < 10; ++i) {
    example::Features extra{{"row", Feature::Int64s({i})}};
    ASSERT_TRUE(source->Add(jpeg, {i % 2}, example::SerializeExample(extra), false).ok());
  }
  // A record without an image keeps its own features and label.
  example::Features bare{{"row", Feature::Int64s({10})}};
  ASSERT_TRUE(source->Add(std::nullopt, {1}, example::SerializeExample(bare), false).ok());
  // An unusable image is skipped and listed under its item name.
  ASSERT_TRUE(source->Add(std::string_view("not an image"), {0}, "", false).ok());

  ConvertOptions options;
  options.train_shards = 2;
  options.val_fraction = 0.25;
  options.seed = 3;
  options.label_offset = 1;
  const std::string dst = (root_ / "out").string();
  Result<ConvertSummary> summary = Convert(*source, dst, options);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->source, "<test>");
  EXPECT_EQ(summary->inputs, 12u);
  EXPECT_EQ(summary->records, 11u);
  ASSERT_EQ(summary->skipped.size(), 1u);
  EXPECT_EQ(summary->skipped[0].path, "item 11");
  EXPECT_EQ(summary->skipped[0].reason.rfind("InvalidArgument: ", 0), 0u);
  ASSERT_EQ(summary->splits.size(), 2u);
  EXPECT_EQ(summary->splits[0].shards.size(), 2u);
  EXPECT_EQ(summary->class_names, (std::vector<std::string>{"cat", "dog"}));

  std::set<int64_t> rows;
  int with_image = 0;
  for (const auto& split : summary->splits) {
    for (const auto& shard : split.shards) {
      for (const auto& f : ReadExamples(dst + "/" + shard.file)) {
        const int64_t row = f.at("row").int64s.at(0);
        rows.insert(row);
        const int64_t label = f.at("image/class/label").int64s.at(0);
        EXPECT_EQ(label, (row == 10 ? 1 : row % 2) + 1) << row;
        EXPECT_EQ(f.at("image/class/text").bytes.at(0), label == 1 ? "cat" : "dog");
        EXPECT_EQ(f.count("image/filename"), 0u);
        if (f.count("image/encoded") != 0) {
          ++with_image;
          EXPECT_EQ(f.at("image/width").int64s.at(0), 20);
        }
      }
    }
  }
  EXPECT_EQ(rows.size(), 11u);
  EXPECT_EQ(with_image, 10);
  EXPECT_TRUE(fs::exists(dst + "/labels.txt"));
}

TEST_F(SpooledSourceTest, SameItemsAndSeedGiveTheSameBytesAndTheSpoolIsRemoved) {
  std::vector<std::string> files;
  for (int run = 0; run < 2; ++run) {
    auto source = Source(std::nullopt);
    for (int i = 0; i < 9; ++i) {
      example::Features extra{{"row", Feature::Int64s({i})}};
      ASSERT_TRUE(source->Add(std::nullopt, {i % 3}, example::SerializeExample(extra), false).ok());
    }
    ConvertOptions options;
    options.train_shards = 1;
    options.seed = 7;
    const std::string dst = (root_ / ("out" + std::to_string(run))).string();
    ASSERT_TRUE(Convert(*source, dst, options).ok());
    files.push_back(*io::ReadFileToString(dst + "/train-00000-of-00001.tfrecord"));
    EXPECT_FALSE(fs::exists(dst + "/labels.txt"));  // integer labels: no names
    source.reset();
    EXPECT_FALSE(fs::exists(root_ / "spool"));
  }
  EXPECT_EQ(files[0], files[1]);
}

TEST_F(SpooledSourceTest, MalformedFeaturesFailWhereTheyAreAdded) {
  auto source = Source(std::nullopt);
  const Status added = source->Add(std::nullopt, {}, "\xff\xff\xff", false);
  EXPECT_EQ(added.code(), StatusCode::kDataLoss);
  EXPECT_NE(added.message().find("item 0"), std::string::npos) << added.ToString();
  EXPECT_EQ(source->size(), 0u);
}

TEST_F(SpooledSourceTest, ADestinationHoldingAConversionIsRefusedBeforeAnyInput) {
  auto source = Source(std::nullopt);
  ASSERT_TRUE(source->Add(std::nullopt, {0}, "", false).ok());
  const std::string dst = (root_ / "out").string();
  ASSERT_TRUE(Convert(*source, dst, ConvertOptions()).ok());
  EXPECT_EQ(CheckDestination(dst, ConvertOptions()).code(), StatusCode::kAlreadyExists);
  ConvertOptions overwrite;
  overwrite.overwrite = true;
  EXPECT_TRUE(CheckDestination(dst, overwrite).ok());
}

}  // namespace
}  // namespace recordflow::convert
