// gs:// through a real GCS emulator (gcp-storage-emulator), gated on STORAGE_EMULATOR_HOST and
// RF_TEST_GCS_BUCKET (scripts/servers/with-remote-servers.sh sets both); with
// RF_REQUIRE_REMOTE_SERVERS=1 a missing emulator fails instead of skipping. HMAC keys (the XML
// API through SigV4) are exercised against the S3 server when RF_TEST_S3_ENDPOINT is set too.
#include <cstdlib>
#include <random>

#include <gtest/gtest.h>

#include "recordflow/format/record_index.h"
#include "recordflow/format/record_reader.h"
#include "recordflow/format/record_writer.h"
#include "recordflow/io/dropping_proxy_test_util.h"
#include "recordflow/io/filesystem.h"
#include "recordflow/io/gcs_internal.h"
#include "recordflow/io/remote_test_util.h"

namespace recordflow::io {
namespace {

using testing_util::ExpectGlobMatchesKeysOnly;
using testing_util::ExpectIndexedReads;
using testing_util::ExpectMissingObjectIsNotFound;
using testing_util::ExpectReadAheadAcrossParts;
using testing_util::ExpectReadsResumeAfterDroppedConnections;
using testing_util::UseFastRetries;

using testing_util::Env;
using testing_util::Payload;
using testing_util::ReadAll;
using testing_util::RequireServers;
using testing_util::WriteShard;

class GcsIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    emulator_ = Env("STORAGE_EMULATOR_HOST");
    bucket_ = Env("RF_TEST_GCS_BUCKET");
    if (emulator_.empty() || bucket_.empty()) {
      if (RequireServers()) FAIL() << "STORAGE_EMULATOR_HOST / RF_TEST_GCS_BUCKET not set";
      GTEST_SKIP() << "STORAGE_EMULATOR_HOST is not set: NO GCS EMULATOR, gs:// tests skipped";
    }
    saved_ = UseFastRetries();
    prefix_ = "cc-" + std::to_string(std::random_device{}()) + "/";
  }
  void TearDown() override {
    SetRemoteOptions(saved_);
    if (!emulator_.empty()) setenv("STORAGE_EMULATOR_HOST", emulator_.c_str(), 1);
  }
  std::string Url(const std::string& key) const { return "gs://" + bucket_ + "/" + prefix_ + key; }

  std::string emulator_, bucket_, prefix_;
  RemoteOptions saved_;
};

TEST_F(GcsIntegrationTest, WriteThenReadRecordsWithReadAheadAcrossParts) {
  ASSERT_NO_FATAL_FAILURE(ExpectReadAheadAcrossParts(Url("d/a.tfrecord")));
  auto info = StatPath(Url("d/a.tfrecord"));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->size, 200u * (3000 + 16));
}

TEST_F(GcsIntegrationTest, ResumableWriteAppearsOnCommitOnlyAndAbortLeavesNothing) {
  RemoteOptions o = GetRemoteOptions();
  o.upload_part_size = 256 * 1024;  // the smallest resumable chunk: several chunks
  SetRemoteOptions(o);
  {
    auto fs = FileSystemForPath(Url("big.bin"));
    ASSERT_TRUE(fs.ok());
    auto w = (*fs)->OpenWritable(Url("big.bin"), {});
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    const std::string p = Payload(7, 700 * 1024);
    ASSERT_TRUE((*w)->Append(std::as_bytes(std::span(p))).ok());
    // Two chunks are in the session, but the object does not exist before Commit.
    EXPECT_EQ(StatPath(Url("big.bin")).status().code(), StatusCode::kNotFound);
    ASSERT_TRUE((*w)->Commit().ok());
    auto info = StatPath(Url("big.bin"));
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(info->size, p.size());
    auto f = (*fs)->OpenRandomAccess(Url("big.bin"));
    ASSERT_TRUE(f.ok());
    std::string back(p.size(), '\0');
    auto n = (*f)->ReadAt(0, std::as_writable_bytes(std::span(back)));
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    EXPECT_EQ(*n, p.size());
    EXPECT_TRUE(back == p);
  }
  {
    auto w = format::RecordWriter::Open(Url("aborted.tfrecord"));
    ASSERT_TRUE(w.ok());
    const std::string p = Payload(1, 300 * 1024);
    for (int i = 0; i < 4; ++i) ASSERT_TRUE((*w)->WriteRecord(std::as_bytes(std::span(p))).ok());
    // Destroyed without Close(): chunks were sent, the session is never finalized.
  }
  EXPECT_EQ(StatPath(Url("aborted.tfrecord")).status().code(), StatusCode::kNotFound);
  // An exact multiple of the chunk size ends with a final request that carries the last byte.
  const auto exact = WriteShard(Url("exact.tfrecord"), 4, 256 * 1024 - 16, false);
  Status s;
  EXPECT_EQ(ReadAll(Url("exact.tfrecord"), &s), exact);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST_F(GcsIntegrationTest, GlobListsMatchingKeysOnlyAndDeleteRemoves) {
  ASSERT_NO_FATAL_FAILURE(
      ExpectGlobMatchesKeysOnly([this](const std::string& key) { return Url(key); }));
  auto dir = StatPath(Url("g"));
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_TRUE(dir->is_directory);
  auto fs = FileSystemForPath(Url("g/val-0.tfrecord"));
  ASSERT_TRUE(fs.ok());
  ASSERT_TRUE((*fs)->Delete(Url("g/val-0.tfrecord")).ok());
  EXPECT_EQ(StatPath(Url("g/val-0.tfrecord")).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE((*fs)->Delete(Url("g/val-0.tfrecord")).ok());  // already gone: OK
}

TEST_F(GcsIntegrationTest, IndexedReaderUsesTheRemoteIndex) {
  ExpectIndexedReads(Url("i/x.tfrecord"));
}

TEST_F(GcsIntegrationTest, MissingObjectAndBucketAreNotFoundNamingTheUrl) {
  ExpectMissingObjectIsNotFound(Url("nope.tfrecord"));
  Status s;
  ReadAll("gs://no-such-bucket-rf/x.tfrecord", &s);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
}

TEST_F(GcsIntegrationTest, DroppedConnectionsResumeWithoutLosingOrDuplicatingRecords) {
  ExpectReadsResumeAfterDroppedConnections(Url("f/r.tfrecord"), emulator_, "STORAGE_EMULATOR_HOST");
}

TEST_F(GcsIntegrationTest, UnreachableEndpointGivesUpNamingUrlAndOffset) {
  RemoteOptions o = GetRemoteOptions();
  o.retry.max_total = std::chrono::milliseconds(500);
  SetRemoteOptions(o);
  setenv("STORAGE_EMULATOR_HOST", "127.0.0.1:1", 1);  // host:port, as Google's libraries take it
  Status s;
  ReadAll(Url("x.tfrecord"), &s);
  EXPECT_EQ(s.code(), StatusCode::kIOError) << s.ToString();
  EXPECT_NE(s.message().find(Url("x.tfrecord")), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("gave up after"), std::string::npos) << s.ToString();
}

// HMAC keys: gs:// goes through the XML API with SigV4 (region "auto"). GCS_XML_ENDPOINT points
// it at the S3 server, which checks the signatures.
TEST_F(GcsIntegrationTest, HmacKeysSignXmlApiRequests) {
  const std::string s3 = Env("RF_TEST_S3_ENDPOINT");
  if (s3.empty()) {
    if (RequireServers()) FAIL() << "RF_TEST_S3_ENDPOINT not set (KINDS must include s3)";
    GTEST_SKIP() << "no S3 server for the HMAC test";
  }
  unsetenv("STORAGE_EMULATOR_HOST");
  setenv("GCS_XML_ENDPOINT", s3.c_str(), 1);
  setenv("GCS_HMAC_ACCESS_KEY_ID", Env("AWS_ACCESS_KEY_ID").c_str(), 1);
  setenv("GCS_HMAC_SECRET", Env("AWS_SECRET_ACCESS_KEY").c_str(), 1);
  const std::string bucket = Env("RF_TEST_S3_BUCKET");
  ASSERT_FALSE(bucket.empty());
  const std::string base = "gs://" + bucket + "/" + prefix_;
  const auto written = WriteShard(base + "h/a.tfrecord", 20, 100, false);
  Status s;
  EXPECT_EQ(ReadAll(base + "h/a.tfrecord", &s), written);
  EXPECT_TRUE(s.ok()) << s.ToString();
  auto m = GlobPaths(base + "h/*.tfrecord");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(*m, std::vector<std::string>{base + "h/a.tfrecord"});
  setenv("GCS_HMAC_SECRET", "wrong-hmac-secret", 1);
  ReadAll(base + "h/a.tfrecord", &s);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  EXPECT_EQ(s.message().find("wrong-hmac-secret"), std::string::npos);
  unsetenv("GCS_HMAC_ACCESS_KEY_ID");
  unsetenv("GCS_HMAC_SECRET");
  unsetenv("GCS_XML_ENDPOINT");
}

TEST(GcsConfigTest, EmulatorHostWithoutSchemeIsHttpAndHmacSelectsTheXmlApi) {
  const std::string saved = Env("STORAGE_EMULATOR_HOST");
  setenv("STORAGE_EMULATOR_HOST", "127.0.0.1:9023", 1);
  EXPECT_EQ(internal::ResolveGcsTarget().base, "http://127.0.0.1:9023");
  EXPECT_TRUE(internal::ResolveGcsTarget().emulator);
  auto auth = internal::GcsAuthorization(RetryOptions());
  ASSERT_TRUE(auth.ok());
  EXPECT_EQ(*auth, "");  // the emulator takes no auth
  unsetenv("STORAGE_EMULATOR_HOST");
  EXPECT_EQ(internal::ResolveGcsTarget().base, "https://storage.googleapis.com");
  setenv("GCS_HMAC_ACCESS_KEY_ID", "GOOG1EXAMPLE", 1);
  EXPECT_EQ(internal::GcsFileSystemForEnvironment(), internal::GcsHmacFileSystemInstance());
  const internal::S3Config c = internal::ResolveGcsHmacConfig();
  EXPECT_EQ(c.region, "auto");
  EXPECT_EQ(c.endpoint, "https://storage.googleapis.com");
  EXPECT_TRUE(c.path_style);
  unsetenv("GCS_HMAC_ACCESS_KEY_ID");
  EXPECT_EQ(internal::GcsFileSystemForEnvironment(), internal::GcsFileSystemInstance());
  if (!saved.empty()) setenv("STORAGE_EMULATOR_HOST", saved.c_str(), 1);
}

}  // namespace
}  // namespace recordflow::io
