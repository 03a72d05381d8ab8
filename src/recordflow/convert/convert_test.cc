// End to end through the filesystem: folder -> Convert -> records; manifests; resume; extract.
#include "recordflow/convert/convert.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "json_internal.h"
#include "recordflow/convert/plan.h"
#include "recordflow/example/example.h"
#include "recordflow/format/record_reader.h"
#include "recordflow/format/record_writer.h"
#include "recordflow/image/image.h"
#include "recordflow/io/file.h"

namespace recordflow::convert {
namespace {
namespace fs = std::filesystem;

class ConvertTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("rf_convert_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string Jpeg(int w, int h) {
    image::Image img;
    img.width = w;
    img.height = h;
    img.channels = 3;
    img.pixels.resize(img.row_bytes() * h);
    for (size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = static_cast<uint8_t>(i * 7 + w);
    return *image::EncodeJpeg(img);
  }
  void Write(const fs::path& p, const std::string& data) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << data;
  }
  std::vector<example::Features> ReadAll(const std::string& path) {
    std::vector<example::Features> out;
    auto reader = format::RecordReader::Open(path);
    EXPECT_TRUE(reader.ok());
    std::span<const std::byte> rec;
    while (*(*reader)->ReadRecord(&rec)) out.push_back(*example::ParseExample(rec));
    return out;
  }
  fs::path root_;
};

TEST_F(ConvertTest, FolderToShardsWithSkips) {
  Write(root_ / "src/b/1.jpg", Jpeg(20, 10));
  Write(root_ / "src/b/2.jpg", Jpeg(30, 15));
  Write(root_ / "src/a/x.jpg", Jpeg(8, 8));
  Write(root_ / "src/a/bad.jpg", "not an image");
  fs::create_directories(root_ / "src/c");
  ConvertOptions o;
  o.train_shards = 2;
  o.sync = false;
  auto s = Convert((root_ / "src").string(), (root_ / "out").string(), o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->class_names, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(s->records, 3u);
  ASSERT_EQ(s->skipped.size(), 2u);
  EXPECT_NE(s->skipped[0].reason.find("empty class folder"), std::string::npos);
  EXPECT_NE(s->skipped[1].reason.find("not an image"), std::string::npos);
  std::map<std::string, int64_t> labels;
  for (const char* shard : {"train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord"}) {
    EXPECT_TRUE(fs::exists(root_ / "out" / (std::string(shard) + ".idx")));
    for (const auto& f : ReadAll((root_ / "out" / shard).string())) {
      labels[f.at("image/filename").bytes[0]] = f.at("image/class/label").int64s[0];
      EXPECT_EQ(f.at("image/format").bytes[0], "JPEG");
    }
  }
  EXPECT_EQ(labels, (std::map<std::string, int64_t>{{"x.jpg", 0}, {"1.jpg", 1}, {"2.jpg", 1}}));
  auto json = internal::ParseJson(s->ToJson());
  ASSERT_TRUE(json.ok()) << json.status().ToString();
  EXPECT_EQ(json->Find("records")->AsInt(), 3);
  // Strict refuses the same input.
  o.strict = true;
  o.overwrite = true;
  EXPECT_FALSE(Convert((root_ / "src").string(), (root_ / "out").string(), o).ok());
}

TEST_F(ConvertTest, ResumeKeepsFinishedShardsAndRedoesTheRest) {
  for (int i = 0; i < 12; ++i) Write(root_ / "src/k" / (std::to_string(i) + ".jpg"), Jpeg(10 + i, 10));
  ConvertOptions o;
  o.train_shards = 4;
  o.sync = false;
  const std::string src = (root_ / "src").string(), out = (root_ / "out").string();
  ASSERT_TRUE(Convert(src, out, o).ok());
  auto shard = [&](int i) { return out + "/train-0000" + std::to_string(i) + "-of-00004.tfrecord"; };
  const std::string reference = *io::ReadFileToString(shard(3));
  // Simulate a kill: shard 3 never published, shard 1's state lost (so it is redone).
  fs::remove(shard(3));
  fs::remove(fs::path(out) / ".recordflow-convert/train-00001-of-00004.tfrecord.json");
  EXPECT_EQ(Convert(src, out, o).status().code(), StatusCode::kAlreadyExists);
  o.resume = true;
  auto s = Convert(src, out, o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->resumed_shards, 2u);
  EXPECT_EQ(s->records, 12u);
  EXPECT_EQ(*io::ReadFileToString(shard(3)), reference);
  // Other options: refused.
  o.seed = 99;
  EXPECT_EQ(Convert(src, out, o).status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(ConvertTest, CsvManifestWithNamedAndMultiLabels) {
  Write(root_ / "img/1.jpg", Jpeg(8, 8));
  Write(root_ / "img/2.jpg", Jpeg(9, 9));
  Write(root_ / "m.csv",
        "image,label,score,comment\nimg/1.jpg,dog|cat,0.5,\"quoted, with comma\"\n"
        "img/2.jpg,cat,2,plain\nimg/missing.jpg,cat,1,x\n");
  ConvertOptions o;
  o.label_separator = "|";
  o.shuffle = false;
  o.sync = false;
  auto s = Convert((root_ / "m.csv").string(), (root_ / "out").string(), o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->class_names, (std::vector<std::string>{"cat", "dog"}));
  ASSERT_EQ(s->skipped.size(), 1u);
  EXPECT_NE(s->skipped[0].path.find("missing.jpg"), std::string::npos);
  auto recs = ReadAll((root_ / "out/train-00000-of-00001.tfrecord").string());
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].at("image/class/label").int64s, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(recs[0].at("image/class/text").bytes, (std::vector<std::string>{"dog", "cat"}));
  EXPECT_EQ(recs[0].at("score").floats, (std::vector<float>{0.5f}));
  EXPECT_EQ(recs[0].at("comment").bytes[0], "quoted, with comma");
  EXPECT_EQ(recs[1].at("image/filename").bytes[0], "img/2.jpg");
}

TEST_F(ConvertTest, ManifestErrors) {
  Write(root_ / "m.csv", "file_path,label\nx.jpg,1\n");
  EXPECT_EQ(ReadManifest((root_ / "m.csv").string(), {}).status().code(),
            StatusCode::kInvalidArgument);
  Write(root_ / "m.jsonl", "{\"image\": \"x.jpg\"}\n{broken\n");
  auto r = ReadManifest((root_ / "m.jsonl").string(), {});
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("m.jsonl:2"), std::string::npos);
}

TEST_F(ConvertTest, ExtractSanitizesNames) {
  const std::string img = Jpeg(4, 4);
  {
    auto w = format::RecordWriter::Open((root_ / "r.tfrecord").string());
    ASSERT_TRUE(w.ok());
    for (const char* name : {"../../../escape.jpg", "/etc/passwd", ".."}) {
      example::Features f;
      f["image/encoded"] = example::Feature::Bytes({img});
      f["image/filename"] = example::Feature::Bytes({name});
      f["image/class/text"] = example::Feature::Bytes({"../up"});
      auto rec = example::SerializeExample(f);
      ASSERT_TRUE((*w)->WriteRecord(std::as_bytes(std::span(rec.data(), rec.size()))).ok());
    }
    ASSERT_TRUE((*w)->Close().ok());
  }
  auto s = Extract({(root_ / "r.tfrecord").string()}, (root_ / "out").string());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->images, 3u);
  EXPECT_TRUE(fs::exists(root_ / "out/up/escape.jpg"));
  EXPECT_TRUE(fs::exists(root_ / "out/up/passwd"));
  EXPECT_TRUE(fs::exists(root_ / "out/up/r-2.bin"));
  EXPECT_FALSE(fs::exists(root_ / "escape.jpg"));
  EXPECT_FALSE(fs::exists(root_.parent_path() / "escape.jpg"));
}

}  // namespace
}  // namespace recordflow::convert
