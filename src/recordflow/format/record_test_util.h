// Helpers shared by the format layer's tests.
#pragma once

#include <stdlib.h>
#include <zlib.h>

#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "recordflow/format/compression.h"
#include "recordflow/format/record_format.h"
#include "recordflow/format/record_reader.h"
#include "recordflow/format/record_writer.h"
#include "recordflow/io/file.h"

namespace recordflow::format::testing {

// `data` compressed in one piece by zlib as `compression` (kGzip or kZlib), at `level` with
// `mem_level`: a stream as another writer makes it, for the readers under test to inflate.
inline std::string Deflate(const std::string& data, Compression compression, int level = 6,
                           int mem_level = 8) {
  z_stream z{};
  const int bits = compression == Compression::kGzip ? MAX_WBITS + 16 : MAX_WBITS;
  EXPECT_EQ(deflateInit2(&z, level, Z_DEFLATED, bits, mem_level, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, data.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// The value of `r`, failing the test when it is an error (the value is then not usable: keep
// such calls where a failure ends the test anyway).
template <typename T>
T Ok(Result<T> r) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

// True in ASan and TSan builds: they reserve terabytes of address space, so a test that limits
// RLIMIT_AS cannot run there.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kUnderSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kUnderSanitizer = true;
#else
inline constexpr bool kUnderSanitizer = false;
#endif
#else
inline constexpr bool kUnderSanitizer = false;
#endif

inline std::string MakeTempDir() {
  std::string tmpl = ::testing::TempDir() + "rf_test_XXXXXX";
  EXPECT_NE(mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

inline std::span<const std::byte> Bytes(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

// Frames `payloads` as TFRecord bytes in memory (independently of RecordWriter).
inline std::string Frame(const std::vector<std::string>& payloads) {
  std::string out;
  for (const auto& p : payloads) {
    std::byte header[kHeaderSize];
    EncodeHeader(header, p.size());
    std::byte footer[kFooterSize];
    EncodeFixed32(footer, MaskCrc(Crc32c(Bytes(p))));
    out.append(reinterpret_cast<const char*>(header), kHeaderSize);
    out += p;
    out.append(reinterpret_cast<const char*>(footer), kFooterSize);
  }
  return out;
}

inline std::string ToString(std::span<const std::byte> b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

struct ReadAllResult {
  std::vector<std::string> records;
  Status status;
  CorruptionStats stats;
};

// Reads every remaining record until the end or the first error.
inline ReadAllResult ReadAll(RecordReader& reader) {
  ReadAllResult out;
  std::span<const std::byte> record;
  while (true) {
    auto more = reader.ReadRecord(&record);
    if (!more.ok()) {
      out.status = more.status();
      break;
    }
    if (!*more) break;
    out.records.push_back(ToString(record));
  }
  out.stats = reader.corruption_stats();
  return out;
}

// Reads every record of an in-memory file until the end or the first error.
inline ReadAllResult ReadAllFromMemory(const std::string& data, RecordReaderOptions options = {},
                                       Compression compression = Compression::kNone) {
  auto reader = RecordReader::FromStream(
      NewMemoryInputStream(Bytes(data), compression, "mem.tfrecord", options.inflater), options,
      compression);
  return ReadAll(*reader);
}

// Reads every record of the file at `path`, failing the calling test at an open or read error
// (the records before it are returned). The golden-file tests compare these with manifests.
inline std::vector<std::string> ReadRecordsOrFail(const std::string& path,
                                                  RecordReaderOptions options = {}) {
  std::vector<std::string> out;
  auto reader = RecordReader::Open(path, options);
  EXPECT_TRUE(reader.ok()) << reader.status().ToString();
  if (!reader.ok()) return out;
  std::span<const std::byte> record;
  while (true) {
    auto more = (*reader)->ReadRecord(&record);
    EXPECT_TRUE(more.ok()) << more.status().ToString();
    if (!more.ok() || !*more) break;
    out.push_back(ToString(record));
  }
  return out;
}

// Writes `payloads` to `path` with RecordWriter (compressed as its extension says, unless
// `options` say otherwise), failing the calling test at any error.
inline void WriteRecordsOrFail(const std::string& path, const std::vector<std::string>& payloads,
                               RecordWriterOptions options = {}) {
  auto writer = RecordWriter::Open(path, options);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  for (const std::string& p : payloads) {
    ASSERT_TRUE((*writer)->WriteRecord(Bytes(p)).ok()) << path;
  }
  ASSERT_TRUE((*writer)->Close().ok()) << path;
}

// Calls `parse_line(kind, fields)` for each line of the manifest `text` (a golden-file list
// that a testdata/golden/*.py script wrote) that is neither blank nor a '#' comment: `kind` is
// its first word, `fields` the rest of it. A line `parse_line` returns false for fails the
// calling test, naming `manifest_name`, the line number and the line.
inline void ForEachManifestLine(
    const std::string& text, const std::string& manifest_name,
    const std::function<bool(const std::string& kind, std::istringstream& fields)>& parse_line) {
  std::istringstream lines(text);
  std::string line;
  int line_no = 0;
  while (std::getline(lines, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string kind;
    fields >> kind;
    EXPECT_TRUE(parse_line(kind, fields)) << manifest_name << " line " << line_no << ": " << line;
  }
}

// The whole file at `path`, or "" after failing the calling test.
inline std::string ReadTextOrFail(const std::string& path) {
  auto text = io::ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : std::string();
}

// testdata/golden, the files TensorFlow wrote (see testdata/golden/*.py).
inline std::string GoldenDir() { return std::string(RF_TESTDATA_DIR) + "/golden"; }

inline std::vector<std::string> SamplePayloads() {
  std::vector<std::string> p = {"", "a", std::string(100, 'x'), "hello world",
                                std::string(5000, '\x01')};
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  p.push_back(all);
  return p;
}

}  // namespace recordflow::format::testing
