// End to end through the filesystem: folder -> Convert -> records; manifests; resume; extract.
#include "recordflow/convert/convert.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "json_internal.h"
#include "recordflow/convert/convert_test_util.h"
#include "recordflow/convert/plan.h"
#include "recordflow/example/example.h"
#include "recordflow/format/record_test_util.h"
#include "recordflow/image/image.h"
#include "recordflow/image/ops.h"
#include "recordflow/io/file.h"

namespace recordflow::convert {
namespace {
namespace fs = std::filesystem;

using testing_util::GradientJpeg;
using testing_util::ImageExample;
using testing_util::NoSyncOptions;
using testing_util::ReadExamples;
using testing_util::RunWithFileSizeLimit;
using testing_util::WriteExamples;

class ConvertTest : public testing_util::TempFolderTest {
 protected:
  std::string Slurp(const fs::path& p) {
    Result<std::string> text = io::ReadFileToString(p.string());
    return text.ok() ? *text : "<missing>";
  }
  // Size and hash of a file's bytes: short in a failure message.
  std::string Digest(const fs::path& p) {
    const std::string bytes = Slurp(p);
    return std::to_string(bytes.size()) + ":" + std::to_string(std::hash<std::string>()(bytes));
  }
};

TEST_F(ConvertTest, FolderToShardsWithSkips) {
  Write(root_ / "src/b/1.jpg", GradientJpeg(20, 10));
  Write(root_ / "src/b/2.jpg", GradientJpeg(30, 15));
  Write(root_ / "src/a/x.jpg", GradientJpeg(8, 8));
  Write(root_ / "src/a/bad.jpg", "not an image");
  fs::create_directories(root_ / "src/c");
  ConvertOptions o = NoSyncOptions();
  o.train_shards = 2;
  auto s = ConvertFolder("src", "out", o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->class_names, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(s->records, 3u);
  ASSERT_EQ(s->skipped.size(), 2u);
  EXPECT_NE(s->skipped[0].reason.find("empty class folder"), std::string::npos);
  EXPECT_NE(s->skipped[1].reason.find("not an image"), std::string::npos);
  std::map<std::string, int64_t> labels;
  for (const char* shard : {"train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord"}) {
    EXPECT_TRUE(fs::exists(root_ / "out" / (std::string(shard) + ".idx")));
    for (const auto& f : ReadExamples((root_ / "out" / shard).string())) {
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
  EXPECT_FALSE(ConvertFolder("src", "out", o).ok());
}

TEST_F(ConvertTest, OutputInsideTheImageFolderIsRefused) {
  Write(root_ / "src/a/1.jpg", GradientJpeg(8, 8));
  auto s = Convert((root_ / "src").string(), (root_ / "src/out").string(), {});
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Convert((root_ / "src").string(), (root_ / "src").string(), {}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(root_ / "src/out"));
}

TEST_F(ConvertTest, ResumeKeepsFinishedShardsAndRedoesTheRest) {
  for (int i = 0; i < 12; ++i)
    Write(root_ / "src/k" / (std::to_string(i) + ".jpg"), GradientJpeg(10 + i, 10));
  ConvertOptions o = NoSyncOptions();
  o.train_shards = 4;
  const std::string src = (root_ / "src").string(), out = (root_ / "out").string();
  ASSERT_TRUE(Convert(src, out, o).ok());
  auto shard = [&](int i) {
    return out + "/train-0000" + std::to_string(i) + "-of-00004.tfrecord";
  };
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
  Write(root_ / "img/1.jpg", GradientJpeg(8, 8));
  Write(root_ / "img/2.jpg", GradientJpeg(9, 9));
  Write(root_ / "m.csv",
        "image,label,score,comment\nimg/1.jpg,dog|cat,0.5,\"quoted, with comma\"\n"
        "img/2.jpg,cat,2,plain\nimg/missing.jpg,cat,1,x\n");
  ConvertOptions o = NoSyncOptions();
  o.label_separator = "|";
  o.shuffle = false;
  auto s = ConvertFolder("m.csv", "out", o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->class_names, (std::vector<std::string>{"cat", "dog"}));
  ASSERT_EQ(s->skipped.size(), 1u);
  EXPECT_NE(s->skipped[0].path.find("missing.jpg"), std::string::npos);
  auto recs = ReadExamples((root_ / "out/train-00000-of-00001.tfrecord").string());
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
  const std::string img = GradientJpeg(4, 4);
  std::vector<example::Features> records;
  for (const char* name : {"../../../escape.jpg", "/etc/passwd", ".."}) {
    records.push_back(ImageExample(img, name, "../up"));
  }
  WriteExamples(root_ / "r.tfrecord", records);
  auto s = Extract({(root_ / "r.tfrecord").string()}, (root_ / "out").string());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->images, 3u);
  EXPECT_TRUE(fs::exists(root_ / "out/up/escape.jpg"));
  EXPECT_TRUE(fs::exists(root_ / "out/up/passwd"));
  // No image/format and no image/filename: the extension comes from the bytes (JPEG).
  EXPECT_TRUE(fs::exists(root_ / "out/up/r-2.jpg"));
  EXPECT_FALSE(fs::exists(root_ / "escape.jpg"));
  EXPECT_FALSE(fs::exists(root_.parent_path() / "escape.jpg"));
}

TEST_F(ConvertTest, SymlinkedImageKeepsItsNameAndDuplicatesAreListed) {
  Write(root_ / "store/blob123", GradientJpeg(12, 12));
  Write(root_ / "src/a/1.jpg", GradientJpeg(8, 8));
  Write(root_ / "src/b/2.jpg", GradientJpeg(9, 9));
  fs::create_symlink("../../store/blob123", root_ / "src/a/link.jpg");
  fs::create_symlink("../a/1.jpg", root_ / "src/b/dup.jpg");     // same inode as a/1.jpg
  fs::create_symlink("../../store", root_ / "src/b/store_dir");  // a folder: not followed
  ConvertOptions o = NoSyncOptions();
  o.shuffle = false;
  auto s = ConvertFolder("src", "out", o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->records, 3u);
  std::set<std::string> names;
  for (const auto& f : ReadExamples((root_ / "out/train-00000-of-00001.tfrecord").string())) {
    names.insert(f.at("image/filename").bytes[0]);
  }
  EXPECT_EQ(names, (std::set<std::string>{"1.jpg", "link.jpg", "2.jpg"}));
  std::map<std::string, std::string> skipped;
  for (const auto& k : s->skipped) skipped[fs::path(k.path).filename().string()] = k.reason;
  ASSERT_EQ(skipped.count("dup.jpg"), 1u);
  EXPECT_NE(skipped["dup.jpg"].find("duplicate"), std::string::npos) << skipped["dup.jpg"];
  EXPECT_NE(skipped["dup.jpg"].find("a/1.jpg"), std::string::npos) << skipped["dup.jpg"];
  ASSERT_EQ(skipped.count("store_dir"), 1u);
  EXPECT_NE(skipped["store_dir"].find("symlink to a folder"), std::string::npos);
}

// An input whose bytes cannot be allocated (a sparse 1 GiB "image" read with 256 MiB of address
// space to spare) is skipped and listed as ResourceExhausted; std::bad_alloc must not escape a
// worker thread (the run would wait forever for that item) nor end the process.
TEST_F(ConvertTest, AllocationFailureInAWorkerIsASkippedInputNotAHang) {
  if (format::testing::kUnderSanitizer) {
    GTEST_SKIP() << "sanitizers reserve terabytes of address space; RLIMIT_AS cannot apply";
  }
  Write(root_ / "src/a/ok.jpg", GradientJpeg(16, 16));
  fs::create_directories(root_ / "src/b");
  {
    std::ofstream(root_ / "src/b/huge.jpg", std::ios::binary) << "\xff\xd8";
    fs::resize_file(root_ / "src/b/huge.jpg", (uint64_t{1} << 30) - 4096);  // sparse
  }
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::alarm(60);  // a hang fails the test (SIGALRM) instead of blocking the suite
    std::ifstream statm("/proc/self/statm");
    uint64_t pages = 0;
    statm >> pages;
    struct rlimit limit;
    limit.rlim_cur = limit.rlim_max =
        pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)) + (uint64_t{256} << 20);
    if (::setrlimit(RLIMIT_AS, &limit) != 0) ::_exit(10);
    ConvertOptions o = NoSyncOptions();
    o.num_threads = 2;
    auto s = ConvertFolder("src", "out", o);
    if (!s.ok()) ::_exit(11);
    if (s->records != 1) ::_exit(12);
    if (s->skipped.size() != 1 || s->skipped[0].path.find("huge.jpg") == std::string::npos) {
      ::_exit(13);
    }
    if (s->skipped[0].reason.find("ResourceExhausted") == std::string::npos) ::_exit(14);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_FALSE(WIFSIGNALED(status)) << "killed by signal " << WTERMSIG(status)
                                    << " (SIGALRM: the run hung; SIGABRT: bad_alloc escaped)";
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "child check failed (see the _exit codes above)";
}

TEST_F(ConvertTest, HiddenEntriesAreListedAsSkipped) {
  Write(root_ / "src/a/1.jpg", GradientJpeg(8, 8));
  Write(root_ / "src/a/.DS_Store", "finder");
  Write(root_ / "src/a/.git/objects/x", "git");
  Write(root_ / "src/.cache/2.jpg", GradientJpeg(8, 8));
  ConvertOptions o = NoSyncOptions();
  o.strict = true;  // hidden entries are left out by design: not a strict failure
  auto s = ConvertFolder("src", "out", o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->records, 1u);
  std::map<std::string, std::string> skipped;
  for (const auto& k : s->skipped) skipped[fs::path(k.path).filename().string()] = k.reason;
  EXPECT_EQ(skipped, (std::map<std::string, std::string>{
                         {".DS_Store", "hidden"}, {".git", "hidden"}, {".cache", "hidden"}}));
  EXPECT_NE(Slurp(root_ / "out/summary.json").find("\"hidden\""), std::string::npos);
}

// Garbage over a few bytes of the entropy-coded data: libjpeg warns and decodes anyway, and
// image::Decode, the structure check and the header all accept it.
std::string JpegWithGarbageMidStream(const std::string& jpeg) {
  const size_t sos = jpeg.find("\xFF\xDA");
  const size_t data =
      sos + 2 + ((static_cast<uint8_t>(jpeg[sos + 2]) << 8) | static_cast<uint8_t>(jpeg[sos + 3]));
  const size_t end = jpeg.rfind("\xFF\xD9");
  for (size_t at = data + (end - data) / 3; at + 8 < end; at += 5) {
    std::string bad = jpeg;
    for (size_t k = 0; k < 6; ++k) bad[at + k] = static_cast<char>(0x5A + k);
    const auto bytes = std::as_bytes(std::span(bad.data(), bad.size()));
    image::ProbeOptions probe;
    probe.check_structure = true;
    if (!image::Probe(bytes, probe).ok() || !image::Decode(bytes).ok()) continue;
    image::ImageDecoder decoder;
    image::RegionDecodeOptions counting;
    counting.warnings = image::JpegWarnings::kCount;
    counting.dct_scaling = false;
    image::DecodedRegion region;
    if (decoder.DecodeRegion(bytes, counting, &region).ok() && region.warnings > 0) return bad;
  }
  return "";
}

TEST_F(ConvertTest, DecodeVerifyTreatsLibjpegWarningsAsErrors) {
  const std::string bad = JpegWithGarbageMidStream(GradientJpeg(64, 48));
  ASSERT_FALSE(bad.empty()) << "no garbage placement that only warns";
  Write(root_ / "src/a/bad.jpg", bad);
  Write(root_ / "src/a/good.jpg", GradientJpeg(64, 48));
  ConvertOptions o = NoSyncOptions();
  o.verify = VerifyLevel::kDecode;
  auto s = ConvertFolder("src", "out", o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->records, 1u);
  ASSERT_EQ(s->skipped.size(), 1u);
  EXPECT_NE(s->skipped[0].path.find("bad.jpg"), std::string::npos);
  EXPECT_NE(s->skipped[0].reason.find("DataLoss"), std::string::npos) << s->skipped[0].reason;
  // The PrepareImage entry point (Python inputs) says the same.
  EXPECT_EQ(PrepareImage(bad, o).status().code(), StatusCode::kDataLoss);
  o.verify = VerifyLevel::kStructure;
  EXPECT_TRUE(PrepareImage(bad, o).ok());
}

TEST_F(ConvertTest, OverwriteKeepsTheEarlierOutputUntilTheNewOneIsComplete) {
  for (int i = 0; i < 4; ++i)
    Write(root_ / "src/a" / (std::to_string(i) + ".jpg"), GradientJpeg(16 + i, 16));
  Write(root_ / "out/README.txt", "the user's own notes");
  ConvertOptions o = NoSyncOptions();
  o.train_shards = 2;
  ASSERT_TRUE(ConvertFolder("src", "out", o).ok());
  std::map<std::string, std::string> before;
  for (const auto& e : fs::directory_iterator(root_ / "out")) {
    if (e.is_regular_file()) before[e.path().filename().string()] = Digest(e.path());
  }
  ASSERT_EQ(before.count("summary.json"), 1u);
  // The new run's images are large: with the disk "full" at 64 KiB per file the first shard
  // cannot be written.
  for (int i = 0; i < 6; ++i)
    Write(root_ / "src2/b" / (std::to_string(i) + ".jpg"), GradientJpeg(400, 300));
  o.overwrite = true;
  o.train_shards = 1;
  const int code =
      RunWithFileSizeLimit(64 << 10, [&] { return ConvertFolder("src2", "out", o).ok(); });
  EXPECT_EQ(code, 1);
  std::map<std::string, std::string> after;
  for (const auto& e : fs::directory_iterator(root_ / "out")) {
    if (e.is_regular_file()) after[e.path().filename().string()] = Digest(e.path());
  }
  EXPECT_EQ(after, before);
  // Nothing of the failed run is left beside DST.
  for (const auto& e : fs::directory_iterator(root_)) {
    EXPECT_EQ(e.path().filename().string().find(".out."), std::string::npos) << e.path();
  }
  // Without a limit the overwrite replaces the output and keeps the user's file.
  auto s = ConvertFolder("src2", "out", o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->destination, (root_ / "out").string());
  EXPECT_EQ(s->records, 6u);
  EXPECT_FALSE(fs::exists(root_ / "out/train-00000-of-00002.tfrecord"));
  EXPECT_TRUE(fs::exists(root_ / "out/train-00000-of-00001.tfrecord"));
  EXPECT_EQ(Slurp(root_ / "out/README.txt"), "the user's own notes");
  EXPECT_EQ(Slurp(root_ / "out/labels.txt"), "b\n");
}

TEST_F(ConvertTest, ManifestRowErrorsNameManifestLineAndField) {
  struct Case {
    const char* file;
    std::string text;
    std::vector<std::string> wanted;  // all in the message
  };
  const std::vector<Case> cases = {
      {"big.jsonl",
       "{\"image\": \"x.jpg\", \"label\": 1}\n{\"image\": \"y.jpg\", \"label\": "
       "18446744073709551616}\n",
       {"big.jsonl", "line 2", "'label'", "18446744073709551616"}},
      {"big.csv",
       "image,label\nx.jpg,18446744073709551616\n",
       {"big.csv", "line 2", "'label'", "18446744073709551616"}},
      {"nul.jsonl",
       "{\"image\": \"a\\u0000b.jpg\", \"label\": 1}\n",
       {"nul.jsonl", "line 1", "'image'", "NUL"}},
      {"object.jsonl",
       "{\"image\": \"x.jpg\", \"label\": {\"a\": 1}}\n",
       {"object.jsonl", "line 1", "'label'", "object"}},
      {"empty.jsonl",
       "{\"image\": \"x.jpg\", \"label\": \"\"}\n",
       {"empty.jsonl", "line 1", "'label'", "empty"}},
      {"empty.csv",
       "image,label\nx.jpg,1\ny.jpg,\n",
       {"empty.csv", "line 3", "'label'", "no label"}},
      {"many.csv",
       "image,label\nx.jpg,1,extra\n",
       {"many.csv", "line 2", "3 fields", "header has 2"}},
      {"few.csv",
       "image,label\nx.jpg,1\ny.jpg\n",
       {"few.csv", "line 3", "1 fields", "header has 2"}},
      {"dup.csv",
       "image,label,image\nx.jpg,1,y.jpg\n",
       {"dup.csv", "line 1", "duplicate column 'image'"}},
      {"dup.jsonl",
       "{\"image\": \"x.jpg\", \"image\": \"y.jpg\"}\n",
       {"dup.jsonl", "line 1", "'image'", "twice"}},
  };
  for (const Case& c : cases) {
    Write(root_ / c.file, c.text);
    auto r = ReadManifest((root_ / c.file).string(), {});
    ASSERT_FALSE(r.ok()) << c.file;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.file;
    for (const std::string& w : c.wanted) {
      EXPECT_NE(r.status().message().find(w), std::string::npos)
          << c.file << ": '" << w << "' not in: " << r.status().message();
    }
  }
  // The label offset may not push a label past int64 either.
  Write(root_ / "ok.csv", "image,label\nx.jpg,5\n");
  ConvertOptions o;
  o.label_offset = INT64_MAX - 1;
  auto r = ReadManifest((root_ / "ok.csv").string(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("label offset"), std::string::npos) << r.status().message();
}

TEST_F(ConvertTest, ExtractNamesFollowTheBytesAndKeepFolders) {
  const std::string jpeg = GradientJpeg(6, 6);
  auto rec = [&](const std::string& filename, const std::string& format) {
    example::Features f = ImageExample(jpeg, filename, "cls");
    f["image/format"] = example::Feature::Bytes({format});
    return f;
  };
  example::Features labels_class = rec("z.jpg", "JPEG");
  labels_class["image/class/text"] = example::Feature::Bytes({"labels.csv"});
  WriteExamples(root_ / "r.tfrecord",
                {rec("n01/sub/x.png", "PNG"), rec("y.gif", "GIF"), rec("w.JPEG", "JPEG"),
                 rec("./n02/../../v.jpg", "JPEG"), labels_class});
  auto s = Extract({(root_ / "r.tfrecord").string()}, (root_ / "out").string());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->images, 5u);
  EXPECT_EQ(Slurp(root_ / "out/cls/n01/sub/x.jpg"), jpeg);
  EXPECT_EQ(Slurp(root_ / "out/cls/y.jpg"), jpeg);
  EXPECT_EQ(Slurp(root_ / "out/cls/w.JPEG"), jpeg);
  EXPECT_EQ(Slurp(root_ / "out/cls/v.jpg"), jpeg);  // ".." in it: only the last component
  EXPECT_FALSE(fs::exists(root_ / "out/cls/n01/sub/x.png"));
  // A class named like the labels CSV does not take its place.
  EXPECT_EQ(Slurp(root_ / "out/labels.csv_class/z.jpg"), jpeg);
  const std::string csv = Slurp(root_ / "out/labels.csv");
  EXPECT_NE(csv.find("cls/n01/sub/x.jpg,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("labels.csv_class/z.jpg,"), std::string::npos) << csv;
}

TEST_F(ConvertTest, ExtractSuffixesForOneNameAreLinear) {
  // 10000 records named alike: choosing -N suffixes by scanning from 1 each time makes this
  // ~5*10^7 lookups (about a minute); a per-name counter makes it 10000.
  constexpr int kRecords = 10000;
  WriteExamples(root_ / "r.tfrecord",
                std::vector<example::Features>(
                    kRecords, ImageExample("x", "same-name-for-every-record.jpg", "c")));
  // CPU time (user + system, every thread), not wall time: the quadratic scan is ~5*10^7 stat
  // calls of CPU work, while wall time on a shared machine also counts other jobs' load.
  const auto cpu_seconds = [] {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
           static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  };
  const double start = cpu_seconds();
  auto s = Extract({(root_ / "r.tfrecord").string()}, (root_ / "out").string());
  const double seconds = cpu_seconds() - start;
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->images, static_cast<uint64_t>(kRecords));
  EXPECT_TRUE(fs::exists(root_ / "out/c/same-name-for-every-record-9999.jpg"));
  EXPECT_LT(seconds, 10.0);
}

}  // namespace
}  // namespace recordflow::convert
