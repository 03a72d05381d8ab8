#include "recordflow/format/compression.h"

#include <zlib.h>

#include <random>

#include <gtest/gtest.h>

#include "recordflow/format/record_test_util.h"
#include "recordflow/io/file.h"

namespace recordflow::format {
namespace {

using testing::Bytes;
using testing::MakeTempDir;

TEST(CompressionTest, ParsesTensorFlowNames) {
  EXPECT_EQ(*ParseCompression(""), Compression::kNone);
  EXPECT_EQ(*ParseCompression("none"), Compression::kNone);
  EXPECT_EQ(*ParseCompression("gzip"), Compression::kGzip);
  EXPECT_EQ(*ParseCompression("GZIP"), Compression::kGzip);
  EXPECT_EQ(*ParseCompression("Zlib"), Compression::kZlib);
  auto bad = ParseCompression("lz4");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("lz4"), std::string::npos);
}

TEST(CompressionTest, FromPath) {
  EXPECT_EQ(CompressionFromPath("a/b.tfrecord"), Compression::kNone);
  EXPECT_EQ(CompressionFromPath("a/b.tfrecord.gz"), Compression::kGzip);
  EXPECT_EQ(CompressionFromPath("b.zz"), Compression::kZlib);
  EXPECT_EQ(CompressionFromPath("b.zlib"), Compression::kZlib);
}

std::string ReadAll(InputStream& in, size_t chunk) {
  std::string out;
  std::vector<std::byte> buf(chunk);
  while (true) {
    auto n = in.Read(buf);
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    if (!n.ok() || *n == 0) break;
    out.append(reinterpret_cast<const char*>(buf.data()), *n);
  }
  return out;
}

struct StreamCase {
  Compression compression;
  Inflater inflater;
};

class RoundTripTest : public ::testing::TestWithParam<StreamCase> {
 protected:
  void SetUp() override {
    if (GetParam().inflater == Inflater::kIsal && !IsalInflaterAvailable()) {
      GTEST_SKIP() << "built without ISA-L";
    }
  }
};

TEST_P(RoundTripTest, WriteThenReadInVariousChunkSizes) {
  std::string dir = MakeTempDir();
  std::string path = dir + "/data";
  std::mt19937 rng(7);
  std::string data(300000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(rng() % 16);  // compressible
  {
    auto out = CreateOutputStream(path, GetParam().compression);
    ASSERT_TRUE(out.ok());
    ASSERT_TRUE((*out)->Write(Bytes(data.substr(0, 1000))).ok());
    ASSERT_TRUE((*out)->Flush().ok());
    ASSERT_TRUE((*out)->Write(Bytes(data.substr(1000))).ok());
    ASSERT_TRUE((*out)->Close().ok());
  }
  for (size_t chunk : {1, 7, 4096, 1 << 20}) {
    InputStreamOptions opts;
    opts.read_size = 5000;
    opts.inflater = GetParam().inflater;
    auto in = OpenInputStream(path, GetParam().compression, opts);
    ASSERT_TRUE(in.ok());
    EXPECT_EQ(ReadAll(**in, chunk), data) << "chunk " << chunk;
  }
}

INSTANTIATE_TEST_SUITE_P(All, RoundTripTest,
                         ::testing::Values(StreamCase{Compression::kNone, Inflater::kAuto},
                                           StreamCase{Compression::kGzip, Inflater::kZlib},
                                           StreamCase{Compression::kGzip, Inflater::kIsal},
                                           StreamCase{Compression::kZlib, Inflater::kZlib},
                                           StreamCase{Compression::kZlib, Inflater::kIsal}));

// Every inflater passes the same tests (one contract, many implementations).
class InflaterTest : public ::testing::TestWithParam<Inflater> {
 protected:
  void SetUp() override {
    if (GetParam() == Inflater::kIsal && !IsalInflaterAvailable()) GTEST_SKIP();
  }
};

std::string GzipWithZlib(const std::string& data) {
  return testing::Deflate(data, Compression::kGzip);
}

TEST_P(InflaterTest, ConcatenatedMembersReadAsOne) {
  std::string a = GzipWithZlib("first member;");
  std::string b = GzipWithZlib("second member");
  std::string both = a + b;
  auto in = NewMemoryInputStream(Bytes(both), Compression::kGzip, "<memory>", GetParam());
  EXPECT_EQ(ReadAll(*in, 3), "first member;second member");
}

TEST_P(InflaterTest, TruncatedStreamIsDataLoss) {
  std::string gz = GzipWithZlib(std::string(10000, 'q'));
  std::string cut = gz.substr(0, gz.size() - 6);
  auto in = NewMemoryInputStream(Bytes(cut), Compression::kGzip, "cut.gz", GetParam());
  std::vector<std::byte> buf(1 << 16);
  Status status;
  while (true) {
    auto n = in->Read(buf);
    if (!n.ok()) {
      status = n.status();
      break;
    }
    if (*n == 0) break;
  }
  EXPECT_EQ(status.code(), StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("cut.gz"), std::string::npos);
}

TEST_P(InflaterTest, GarbageIsDataLossWithHint) {
  std::string junk = "this is not gzip data at all";
  auto in = NewMemoryInputStream(Bytes(junk), Compression::kGzip, "junk.gz", GetParam());
  std::vector<std::byte> buf(100);
  auto n = in->Read(buf);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(n.status().message().find("really GZIP"), std::string::npos);
}

TEST_P(InflaterTest, ZeroByteFileIsEmpty) {
  std::string empty;
  auto in = NewMemoryInputStream(Bytes(empty), Compression::kGzip, "<memory>", GetParam());
  EXPECT_EQ(ReadAll(*in, 10), "");
}

INSTANTIATE_TEST_SUITE_P(All, InflaterTest, ::testing::Values(Inflater::kZlib, Inflater::kIsal),
                         [](const auto& info) {
                           return info.param == Inflater::kZlib ? std::string("zlib")
                                                                : std::string("isal");
                         });

TEST_P(InflaterTest, ZlibFormatAndCorruptTrailer) {
  std::string data(50000, 'r');
  for (size_t i = 0; i < data.size(); i += 7) data[i] = static_cast<char>(i);
  std::string zz = testing::Deflate(data, Compression::kZlib);
  auto in = NewMemoryInputStream(Bytes(zz), Compression::kZlib, "ok.zz", GetParam());
  EXPECT_EQ(ReadAll(*in, 999), data);
  zz[zz.size() - 2] ^= 1;  // adler32 trailer
  auto bad = NewMemoryInputStream(Bytes(zz), Compression::kZlib, "bad.zz", GetParam());
  std::vector<std::byte> buf(1 << 20);
  Status status;
  for (int i = 0; i < 10 && status.ok(); ++i) {
    auto n = bad->Read(buf);
    if (!n.ok()) {
      status = n.status();
    } else if (*n == 0) {
      break;
    }
  }
  EXPECT_EQ(status.code(), StatusCode::kDataLoss) << status.ToString();
}

TEST(OutputStreamTest, BadLevelRejected) {
  OutputStreamOptions o;
  o.compression_level = 11;
  auto out = CreateOutputStream(MakeTempDir() + "/x.gz", Compression::kGzip, o);
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
}

TEST(OutputStreamTest, AbortedStreamLeavesNoFile) {
  std::string path = MakeTempDir() + "/x.gz";
  {
    auto out = CreateOutputStream(path, Compression::kGzip);
    ASSERT_TRUE(out.ok());
    ASSERT_TRUE((*out)->Write(Bytes(std::string(1000, 'z'))).ok());
  }
  EXPECT_EQ(io::RandomAccessFile::Open(path).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace recordflow::format
