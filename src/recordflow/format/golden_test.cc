// Byte compatibility with TensorFlow, checked against files TensorFlow itself wrote.
//
// testdata/golden/ holds TFRecord files written by tf.io.TFRecordWriter (uncompressed, GZIP and
// ZLIB) and manifest.txt, which lists every record's length and CRC32C as computed in Python by
// make_golden.py, independently of both TensorFlow and recordflow. These tests read the golden
// files with RecordReader, write the same records with RecordWriter and compare bytes, and
// compare index files with the index the manifest derives from the framing.
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "recordflow/format/compression.h"
#include "recordflow/format/crc32c.h"
#include "recordflow/format/record_index.h"
#include "recordflow/format/record_reader.h"
#include "recordflow/format/record_test_util.h"
#include "recordflow/format/record_writer.h"
#include "recordflow/io/file.h"
#include "recordflow/io/sigv4.h"

namespace recordflow::format {
namespace {

const std::string kGoldenDir = testing::GoldenDir();

// ---- manifest.txt ---------------------------------------------------------------------------

struct GoldenRecord {
  uint64_t length = 0;
  uint32_t crc32c = 0;
  std::string hex;  // the payload, for short ones; empty otherwise
};

struct GoldenFile {
  std::string name;
  Compression compression = Compression::kNone;
  uint64_t record_count = 0;
  std::vector<GoldenRecord> records;
  std::vector<IndexEntry> index;  // uncompressed files only
  std::string path() const { return kGoldenDir + "/" + name; }
};

// Parses the line format make_golden.py writes:
//   file <name> <NONE|GZIP|ZLIB> <record_count>
//   record <length> <crc32c hex> <payload hex or ->
//   index <offset> <size>
std::vector<GoldenFile> ParseManifest(const std::string& text) {
  std::vector<GoldenFile> files;
  testing::ForEachManifestLine(
      text, "manifest.txt", [&files](const std::string& kind, std::istringstream& fields) {
        if (kind == "file") {
          GoldenFile f;
          std::string compression;
          bool ok = static_cast<bool>(fields >> f.name >> compression >> f.record_count);
          auto parsed = ParseCompression(compression);
          ok = ok && parsed.ok();
          if (ok) f.compression = *parsed;
          files.push_back(std::move(f));
          return ok;
        }
        if (kind == "record" && !files.empty()) {
          GoldenRecord r;
          std::string crc, hex;
          const bool ok = static_cast<bool>(fields >> r.length >> crc >> hex);
          if (ok) r.crc32c = static_cast<uint32_t>(std::stoul(crc, nullptr, 16));
          if (hex != "-") r.hex = hex;
          files.back().records.push_back(std::move(r));
          return ok;
        }
        if (kind == "index" && !files.empty()) {
          IndexEntry e;
          const bool ok = static_cast<bool>(fields >> e.offset >> e.size);
          files.back().index.push_back(e);
          return ok;
        }
        return false;
      });
  return files;
}

const std::vector<GoldenFile>& Manifest() {
  static const std::vector<GoldenFile> files = [] {
    return ParseManifest(testing::ReadTextOrFail(kGoldenDir + "/manifest.txt"));
  }();
  return files;
}

const GoldenFile& FindGolden(const std::string& name) {
  for (const auto& f : Manifest()) {
    if (f.name == name) return f;
  }
  ADD_FAILURE() << name << " is not in manifest.txt";
  static const GoldenFile kMissing;
  return kMissing;
}

// ---- helpers --------------------------------------------------------------------------------

using testing::Bytes;
using testing::ReadRecordsOrFail;
using testing::ReadTextOrFail;

// Checks `records` against the manifest's lengths, CRC32Cs and (short) payload bytes.
void ExpectMatchesManifest(const GoldenFile& golden, const std::vector<std::string>& records) {
  ASSERT_EQ(records.size(), golden.record_count) << golden.name;
  ASSERT_EQ(golden.records.size(), golden.record_count) << golden.name << ": manifest itself";
  for (size_t i = 0; i < records.size(); ++i) {
    const GoldenRecord& want = golden.records[i];
    SCOPED_TRACE(golden.name + " record " + std::to_string(i));
    EXPECT_EQ(records[i].size(), want.length);
    EXPECT_EQ(Crc32c(Bytes(records[i])), want.crc32c);
    if (!want.hex.empty()) {
      EXPECT_EQ(io::internal::HexEncode(records[i]), want.hex);
    }
  }
}

// The payloads of records.tfrecord, checked against the manifest first.
const std::vector<std::string>& GoldenPayloads() {
  static const std::vector<std::string> payloads = [] {
    std::vector<std::string> p = ReadRecordsOrFail(FindGolden("records.tfrecord").path());
    ExpectMatchesManifest(FindGolden("records.tfrecord"), p);
    return p;
  }();
  return payloads;
}

std::string IndexText(const std::vector<IndexEntry>& entries) {
  std::string text;
  for (const auto& e : entries)
    text += std::to_string(e.offset) + " " + std::to_string(e.size) + "\n";
  return text;
}

// Inflates a whole GZIP or ZLIB file with zlib itself, not with recordflow's stream.
std::string Inflate(const std::string& compressed, Compression compression) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, compression == Compression::kGzip ? MAX_WBITS + 16 : MAX_WBITS), Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  z.avail_in = static_cast<uInt>(compressed.size());
  std::string out;
  char buf[1 << 16];
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof(buf);
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof(buf) - z.avail_out);
    if (rc == Z_BUF_ERROR && z.avail_in == 0) break;
  }
  EXPECT_EQ(rc, Z_STREAM_END) << "zlib could not inflate the whole stream";
  EXPECT_EQ(z.avail_in, 0u) << "bytes after the end of the compressed stream";
  inflateEnd(&z);
  return out;
}

// A fresh folder per test, removed afterwards.
class GoldenWriteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "golden_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  // Writes `payloads` with RecordWriter; returns the file's bytes.
  std::string Write(const std::string& name, const std::vector<std::string>& payloads,
                    RecordWriterOptions options = {}) {
    options.sync = false;
    auto writer = RecordWriter::Open(Path(name), options);
    EXPECT_TRUE(writer.ok()) << writer.status().ToString();
    if (!writer.ok()) return {};
    for (const auto& p : payloads) {
      Status s = (*writer)->WriteRecord(Bytes(p));
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
    Status s = (*writer)->Close();
    EXPECT_TRUE(s.ok()) << s.ToString();
    return ReadTextOrFail(Path(name));
  }

  std::string dir_;
};

// ---- the manifest itself --------------------------------------------------------------------

TEST(GoldenManifest, ListsEveryGoldenFile) {
  std::map<std::string, Compression> want = {
      {"records.tfrecord", Compression::kNone},    {"records.tfrecord.gz", Compression::kGzip},
      {"records.tfrecord.zz", Compression::kZlib}, {"empty.tfrecord", Compression::kNone},
      {"empty.tfrecord.gz", Compression::kGzip},   {"empty.tfrecord.zz", Compression::kZlib},
      {"flushed.tfrecord.gz", Compression::kGzip},
  };
  std::map<std::string, Compression> got;
  for (const auto& f : Manifest()) {
    got[f.name] = f.compression;
    EXPECT_TRUE(std::filesystem::is_regular_file(f.path())) << f.path();
    EXPECT_EQ(f.records.size(), f.record_count) << f.name;
  }
  EXPECT_EQ(got, want);
}

TEST(GoldenManifest, RecordsCoverTheAdvertisedCases) {
  const GoldenFile& g = FindGolden("records.tfrecord");
  ASSERT_GE(g.records.size(), 4u);
  bool empty = false, one_byte = false, all_bytes = false, large = false;
  for (const auto& r : g.records) {
    empty |= r.length == 0;
    one_byte |= r.length == 1;
    all_bytes |= r.length == 256;
    large |= r.length >= 64 * 1024;
  }
  EXPECT_TRUE(empty && one_byte && all_bytes && large);
  // The same sequence in every compression.
  for (const char* name : {"records.tfrecord.gz", "records.tfrecord.zz"}) {
    const GoldenFile& c = FindGolden(name);
    ASSERT_EQ(c.records.size(), g.records.size()) << name;
    for (size_t i = 0; i < g.records.size(); ++i) {
      EXPECT_EQ(c.records[i].length, g.records[i].length) << name << " record " << i;
      EXPECT_EQ(c.records[i].crc32c, g.records[i].crc32c) << name << " record " << i;
    }
  }
}

// ---- reading what TensorFlow wrote ----------------------------------------------------------

class GoldenReadTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenReadTest, CompressionFromFileName) {
  const GoldenFile& g = FindGolden(GetParam());
  ExpectMatchesManifest(g, ReadRecordsOrFail(g.path()));
}

TEST_P(GoldenReadTest, ExplicitCompression) {
  const GoldenFile& g = FindGolden(GetParam());
  RecordReaderOptions options;
  options.compression = g.compression;
  ExpectMatchesManifest(g, ReadRecordsOrFail(g.path(), options));
}

TEST_P(GoldenReadTest, SmallestBufferAndNoChecksums) {
  // A 4 KiB buffer makes the 64 KiB record grow it and small records straddle refills.
  const GoldenFile& g = FindGolden(GetParam());
  RecordReaderOptions options;
  options.buffer_size = 1;  // clamped to the minimum
  ExpectMatchesManifest(g, ReadRecordsOrFail(g.path(), options));
  options.verify_checksums = false;
  ExpectMatchesManifest(g, ReadRecordsOrFail(g.path(), options));
}

TEST_P(GoldenReadTest, OffsetsAndCountsAfterReading) {
  const GoldenFile& g = FindGolden(GetParam());
  auto reader = RecordReader::Open(g.path());
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  std::span<const std::byte> record;
  uint64_t expected_offset = 0;
  for (uint64_t i = 0; i < g.record_count; ++i) {
    auto more = (*reader)->ReadRecord(&record);
    ASSERT_TRUE(more.ok() && *more) << more.status().ToString();
    EXPECT_EQ((*reader)->last_record_offset(), expected_offset) << "record " << i;
    expected_offset += record.size() + 16;
    EXPECT_EQ((*reader)->offset(), expected_offset) << "record " << i;
  }
  auto more = (*reader)->ReadRecord(&record);
  ASSERT_TRUE(more.ok()) << more.status().ToString();
  EXPECT_FALSE(*more);
  // End of sequence stays end of sequence.
  more = (*reader)->ReadRecord(&record);
  ASSERT_TRUE(more.ok()) << more.status().ToString();
  EXPECT_FALSE(*more);
  EXPECT_EQ((*reader)->records_read(), g.record_count);
  EXPECT_EQ((*reader)->corruption_stats().records_skipped, 0u);
  EXPECT_EQ((*reader)->compressed(), g.compression != Compression::kNone);
}

INSTANTIATE_TEST_SUITE_P(GoldenFiles, GoldenReadTest,
                         ::testing::Values("records.tfrecord", "records.tfrecord.gz",
                                           "records.tfrecord.zz", "empty.tfrecord",
                                           "empty.tfrecord.gz", "empty.tfrecord.zz",
                                           "flushed.tfrecord.gz"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

TEST(GoldenRead, CompressedFilesHoldTheUncompressedBytes) {
  const std::string raw = ReadTextOrFail(FindGolden("records.tfrecord").path());
  EXPECT_EQ(Inflate(ReadTextOrFail(FindGolden("records.tfrecord.gz").path()), Compression::kGzip),
            raw);
  EXPECT_EQ(Inflate(ReadTextOrFail(FindGolden("records.tfrecord.zz").path()), Compression::kZlib),
            raw);
}

TEST(GoldenRead, TruncatedGoldenFileIsDataLoss) {
  const std::string raw = ReadTextOrFail(FindGolden("records.tfrecord").path());
  const GoldenFile& g = FindGolden("records.tfrecord");
  ASSERT_FALSE(g.index.empty());
  const IndexEntry last = g.index.back();
  // Cut inside the last record's footer, payload and header.
  for (uint64_t cut : {uint64_t{1}, uint64_t{4}, uint64_t{5}, last.size - 12, last.size - 1}) {
    SCOPED_TRACE("cut " + std::to_string(cut) + " bytes");
    std::string data = raw.substr(0, raw.size() - cut);
    auto reader = RecordReader::FromStream(
        NewMemoryInputStream(Bytes(data), Compression::kNone, "truncated.tfrecord"));
    std::span<const std::byte> record;
    for (uint64_t i = 0; i + 1 < g.record_count; ++i) {
      auto more = reader->ReadRecord(&record);
      ASSERT_TRUE(more.ok() && *more) << "record " << i << ": " << more.status().ToString();
    }
    auto more = reader->ReadRecord(&record);
    ASSERT_FALSE(more.ok());
    EXPECT_EQ(more.status().code(), StatusCode::kDataLoss) << more.status().ToString();
    EXPECT_NE(more.status().message().find("truncated.tfrecord"), std::string::npos);
    EXPECT_NE(more.status().message().find("offset " + std::to_string(last.offset)),
              std::string::npos)
        << more.status().ToString();
  }
}

TEST(GoldenRead, TruncatedGoldenGzipIsDataLoss) {
  for (const char* name : {"records.tfrecord.gz", "records.tfrecord.zz"}) {
    const GoldenFile& g = FindGolden(name);
    const std::string compressed = ReadTextOrFail(g.path());
    // Dropping the trailer (checksum) or part of the last block must not pass silently.
    for (size_t cut : {size_t{1}, size_t{3}, size_t{100}}) {
      SCOPED_TRACE(std::string(name) + " cut " + std::to_string(cut));
      std::string data = compressed.substr(0, compressed.size() - cut);
      auto reader = RecordReader::FromStream(NewMemoryInputStream(Bytes(data), g.compression, name),
                                             {}, g.compression);
      std::span<const std::byte> record;
      Status error;
      uint64_t n = 0;
      while (true) {
        auto more = reader->ReadRecord(&record);
        if (!more.ok()) {
          error = more.status();
          break;
        }
        if (!*more) break;
        ++n;
      }
      EXPECT_EQ(error.code(), StatusCode::kDataLoss)
          << "read " << n << " records, then " << error.ToString();
    }
  }
}

// ---- writing what TensorFlow writes ---------------------------------------------------------

TEST_F(GoldenWriteTest, UncompressedIsByteIdenticalToTensorFlow) {
  const std::string golden = ReadTextOrFail(FindGolden("records.tfrecord").path());
  const std::string ours = Write("records.tfrecord", GoldenPayloads());
  ASSERT_EQ(ours.size(), golden.size());
  EXPECT_TRUE(ours == golden) << "first difference at byte "
                              << std::distance(
                                     ours.begin(),
                                     std::mismatch(ours.begin(), ours.end(), golden.begin()).first);
}

TEST_F(GoldenWriteTest, UncompressedIsByteIdenticalWhateverTheBufferSize) {
  // Records larger than the buffer take the writer's unbuffered path.
  const std::string golden = ReadTextOrFail(FindGolden("records.tfrecord").path());
  for (size_t buffer_size : {size_t{1}, size_t{4096}, size_t{5000}, size_t{1} << 16}) {
    RecordWriterOptions options;
    options.buffer_size = buffer_size;
    std::string name = "records-" + std::to_string(buffer_size) + ".tfrecord";
    EXPECT_TRUE(Write(name, GoldenPayloads(), options) == golden) << "buffer " << buffer_size;
  }
}

TEST_F(GoldenWriteTest, FlushBetweenRecordsChangesNoByte) {
  const std::string golden = ReadTextOrFail(FindGolden("records.tfrecord").path());
  RecordWriterOptions options;
  options.sync = false;
  auto writer = RecordWriter::Open(Path("flushed.tfrecord"), options);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  for (const auto& p : GoldenPayloads()) {
    ASSERT_TRUE((*writer)->WriteRecord(Bytes(p)).ok());
    ASSERT_TRUE((*writer)->Flush().ok());
  }
  ASSERT_TRUE((*writer)->Close().ok());
  EXPECT_TRUE(ReadTextOrFail(Path("flushed.tfrecord")) == golden);
}

TEST_F(GoldenWriteTest, EmptyFileIsByteIdenticalToTensorFlow) {
  EXPECT_EQ(Write("empty.tfrecord", {}), ReadTextOrFail(FindGolden("empty.tfrecord").path()));
}

class GoldenCompressedWriteTest : public GoldenWriteTest,
                                  public ::testing::WithParamInterface<const char*> {};

TEST_P(GoldenCompressedWriteTest, RoundTripsAndInflatesToTensorFlowsBytes) {
  const std::string ext = GetParam();
  const Compression compression = ext == ".gz" ? Compression::kGzip : Compression::kZlib;
  const std::string raw = ReadTextOrFail(FindGolden("records.tfrecord").path());
  const GoldenFile& golden = FindGolden("records.tfrecord" + ext);
  for (int level : {-1, 0, 1, 9}) {
    SCOPED_TRACE("level " + std::to_string(level));
    RecordWriterOptions options;
    options.compression_level = level;
    std::string name = "records-" + std::to_string(level) + ".tfrecord" + ext;
    const std::string ours = Write(name, GoldenPayloads(), options);
    // Any zlib (TensorFlow's included) decompresses it to exactly TensorFlow's record stream.
    EXPECT_TRUE(Inflate(ours, compression) == raw);
    // recordflow reads it back, by extension and by explicit option.
    ExpectMatchesManifest(golden, ReadRecordsOrFail(Path(name)));
    RecordReaderOptions read_options;
    read_options.compression = compression;
    EXPECT_EQ(ReadRecordsOrFail(Path(name), read_options), GoldenPayloads());
  }
  // Explicit compression on a name without the extension.
  RecordWriterOptions options;
  options.compression = compression;
  const std::string ours = Write("records.plain-name", GoldenPayloads(), options);
  EXPECT_TRUE(Inflate(ours, compression) == raw);
  RecordReaderOptions read_options;
  read_options.compression = compression;
  EXPECT_EQ(ReadRecordsOrFail(Path("records.plain-name"), read_options), GoldenPayloads());
}

TEST_P(GoldenCompressedWriteTest, DefaultLevelIsByteIdenticalToTensorFlow) {
  // Same zlib settings as TensorFlow's writer (default level, memLevel 9, one stream).
  const std::string ext = GetParam();
  const std::string ours = Write("records-tf.tfrecord" + ext, GoldenPayloads());
  EXPECT_TRUE(ours == ReadTextOrFail(FindGolden("records.tfrecord" + ext).path()));
}

TEST_P(GoldenCompressedWriteTest, EmptyFileInflatesToNothing) {
  const std::string ext = GetParam();
  const Compression compression = ext == ".gz" ? Compression::kGzip : Compression::kZlib;
  const std::string ours = Write("empty.tfrecord" + ext, {});
  EXPECT_FALSE(ours.empty()) << "a compressed stream has a header even with no records";
  EXPECT_EQ(Inflate(ours, compression), "");
  EXPECT_TRUE(ReadRecordsOrFail(Path("empty.tfrecord" + ext)).empty());
}

TEST_P(GoldenCompressedWriteTest, FlushBetweenRecordsReadsBack) {
  // Like TFRecordWriter.flush(): each flush ends a deflate block mid-stream.
  const std::string ext = GetParam();
  const Compression compression = ext == ".gz" ? Compression::kGzip : Compression::kZlib;
  RecordWriterOptions options;
  options.sync = false;
  auto writer = RecordWriter::Open(Path("flushed.tfrecord" + ext), options);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  for (const auto& p : GoldenPayloads()) {
    ASSERT_TRUE((*writer)->WriteRecord(Bytes(p)).ok());
    ASSERT_TRUE((*writer)->Flush().ok());
  }
  ASSERT_TRUE((*writer)->Close().ok());
  EXPECT_TRUE(Inflate(ReadTextOrFail(Path("flushed.tfrecord" + ext)), compression) ==
              ReadTextOrFail(FindGolden("records.tfrecord").path()));
  EXPECT_EQ(ReadRecordsOrFail(Path("flushed.tfrecord" + ext)), GoldenPayloads());
}

INSTANTIATE_TEST_SUITE_P(GoldenGzipAndZlib, GoldenCompressedWriteTest,
                         ::testing::Values(".gz", ".zz"), [](const auto& info) {
                           return std::string(info.param) == ".gz" ? "Gzip" : "Zlib";
                         });

// ---- index files ----------------------------------------------------------------------------

TEST(GoldenIndex, BuildIndexMatchesManifest) {
  const GoldenFile& g = FindGolden("records.tfrecord");
  ASSERT_EQ(g.index.size(), g.record_count);
  auto index = BuildIndex(g.path());
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  EXPECT_EQ(*index, g.index);

  auto empty = BuildIndex(FindGolden("empty.tfrecord").path());
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->empty());

  auto compressed = BuildIndex(FindGolden("records.tfrecord.gz").path());
  ASSERT_FALSE(compressed.ok());
  EXPECT_EQ(compressed.status().code(), StatusCode::kInvalidArgument);
}

TEST(GoldenIndex, IndexedReaderReadsEveryRecordByNumber) {
  const GoldenFile& g = FindGolden("records.tfrecord");
  auto reader = IndexedRecordReader::Open(g.path(), g.index);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  std::vector<std::byte> scratch;
  // Back to front, so no read depends on the one before.
  for (uint64_t i = g.record_count; i-- > 0;) {
    auto record = (*reader)->ReadRecord(i, &scratch);
    ASSERT_TRUE(record.ok()) << record.status().ToString();
    EXPECT_EQ(record->size(), g.records[i].length) << "record " << i;
    EXPECT_EQ(Crc32c(*record), g.records[i].crc32c) << "record " << i;
  }
}

TEST_F(GoldenWriteTest, WriterIndexMatchesManifest) {
  const GoldenFile& g = FindGolden("records.tfrecord");
  const std::string expected = IndexText(g.index);

  RecordWriterOptions options;
  options.write_index = true;
  const std::string ours = Write("records.tfrecord", GoldenPayloads(), options);
  EXPECT_TRUE(ours == ReadTextOrFail(g.path()));
  EXPECT_EQ(ReadTextOrFail(Path("records.tfrecord.idx")), expected);

  auto parsed = ReadIndexFile(Path("records.tfrecord.idx"));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(*parsed, g.index);

  // A small buffer flushes index lines in many pieces; an explicit path puts them elsewhere.
  options.buffer_size = 1;
  options.index_path = Path("elsewhere.idx");
  Write("small-buffer.tfrecord", GoldenPayloads(), options);
  EXPECT_EQ(ReadTextOrFail(Path("elsewhere.idx")), expected);
  EXPECT_FALSE(std::filesystem::exists(Path("small-buffer.tfrecord.idx")));

  // WriteIndexFile writes the same text as the writer.
  ASSERT_TRUE(WriteIndexFile(Path("written.idx"), g.index).ok());
  EXPECT_EQ(ReadTextOrFail(Path("written.idx")), expected);
}

TEST_F(GoldenWriteTest, WriterIndexOfEmptyFileIsEmpty) {
  RecordWriterOptions options;
  options.write_index = true;
  Write("empty.tfrecord", {}, options);
  EXPECT_EQ(ReadTextOrFail(Path("empty.tfrecord.idx")), "");
}

}  // namespace
}  // namespace recordflow::format
