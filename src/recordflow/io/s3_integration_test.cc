// Remote storage through a real S3 server (SeaweedFS), gated on RF_TEST_S3_ENDPOINT
// ("http://127.0.0.1:8333") with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY set. A small
// in-process TCP proxy drops connections mid-response to prove resumption.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "recordflow/format/record_index.h"
#include "recordflow/format/record_reader.h"
#include "recordflow/format/record_writer.h"
#include "recordflow/io/dropping_proxy_test_util.h"
#include "recordflow/io/filesystem.h"
#include "recordflow/io/filesystem_internal.h"
#include "recordflow/io/http_client.h"
#include "recordflow/io/remote_test_util.h"

namespace recordflow::io {
namespace {

std::string Endpoint() {
  const char* e = std::getenv("RF_TEST_S3_ENDPOINT");
  return e == nullptr ? "" : e;
}

using testing_util::ExpectGlobMatchesKeysOnly;
using testing_util::ExpectIndexedReads;
using testing_util::ExpectMissingObjectIsNotFound;
using testing_util::ExpectReadAheadAcrossParts;
using testing_util::ExpectReadsResumeAfterDroppedConnections;
using testing_util::Payload;
using testing_util::ReadAll;
using testing_util::UseFastRetries;
using testing_util::WriteShard;

class S3IntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Endpoint().empty()) {
      GTEST_SKIP() << "RF_TEST_S3_ENDPOINT is not set: NO S3 SERVER, remote tests skipped";
    }
    setenv("AWS_ENDPOINT_URL_S3", Endpoint().c_str(), 1);
    saved_ = UseFastRetries();
    bucket_ = "rf-test-" + std::to_string(std::random_device{}());
    internal::S3Config c = internal::ResolveS3Config();
    internal::HttpResponse r;
    auto a = internal::HttpClient::Default().Perform(
        internal::S3Request(c, "PUT", bucket_, "", "", {}, {}), GetRemoteOptions().retry, &r);
    ASSERT_TRUE(a.status.ok()) << a.status.ToString();
    ASSERT_EQ(r.status, 200) << r.body;
  }
  void TearDown() override { SetRemoteOptions(saved_); }

  std::string Url(const std::string& key) const { return "s3://" + bucket_ + "/" + key; }

  RemoteOptions saved_;
  std::string bucket_;
};

TEST_F(S3IntegrationTest, WriteThenReadRecordsWithReadAheadAcrossParts) {
  ExpectReadAheadAcrossParts(Url("d/a.tfrecord"));
}

TEST_F(S3IntegrationTest, MultipartWriteCompletesOnCloseOnly) {
  RemoteOptions o = GetRemoteOptions();
  o.upload_part_size = 5 << 20;
  SetRemoteOptions(o);
  const auto written = WriteShard(Url("big.tfrecord"), 12, 1 << 20, false);  // 3 parts
  Status s;
  EXPECT_EQ(ReadAll(Url("big.tfrecord"), &s), written);
  ASSERT_TRUE(s.ok()) << s.ToString();
  {
    auto w = format::RecordWriter::Open(Url("aborted.tfrecord"));
    ASSERT_TRUE(w.ok());
    const std::string p = Payload(1, 1 << 20);
    for (int i = 0; i < 8; ++i) ASSERT_TRUE((*w)->WriteRecord(std::as_bytes(std::span(p))).ok());
    // Destroyed without Close(): at least one part was uploaded, and the upload is aborted.
  }
  auto st = StatPath(Url("aborted.tfrecord"));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kNotFound);
}

TEST_F(S3IntegrationTest, GlobListsMatchingKeysOnly) {
  ExpectGlobMatchesKeysOnly([this](const std::string& key) { return Url(key); });
}

TEST_F(S3IntegrationTest, IndexedReaderUsesTheRemoteIndex) {
  ExpectIndexedReads(Url("i/x.tfrecord"));
}

TEST_F(S3IntegrationTest, MissingObjectIsNotFoundAndBadSecretIsPermissionDenied) {
  ExpectMissingObjectIsNotFound(Url("nope.tfrecord"));
  Status s;
  WriteShard(Url("p.tfrecord"), 1, 10, false);
  const std::string secret = std::getenv("AWS_SECRET_ACCESS_KEY");
  setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-value", 1);
  ReadAll(Url("p.tfrecord"), &s);
  setenv("AWS_SECRET_ACCESS_KEY", secret.c_str(), 1);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  EXPECT_EQ(s.message().find("wrong-secret-value"), std::string::npos);
}

TEST_F(S3IntegrationTest, DroppedConnectionsResumeWithoutLosingOrDuplicatingRecords) {
  ExpectReadsResumeAfterDroppedConnections(Url("f/r.tfrecord"), Endpoint(), "AWS_ENDPOINT_URL_S3");
}

TEST_F(S3IntegrationTest, UnreachableEndpointGivesUpNamingUrlAndOffset) {
  RemoteOptions o = GetRemoteOptions();
  o.retry.max_total = std::chrono::milliseconds(500);
  SetRemoteOptions(o);
  setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:1", 1);
  Status s;
  ReadAll(Url("x.tfrecord"), &s);
  setenv("AWS_ENDPOINT_URL_S3", Endpoint().c_str(), 1);
  EXPECT_EQ(s.code(), StatusCode::kIOError) << s.ToString();
  EXPECT_NE(s.message().find(Url("x.tfrecord")), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("gave up after"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace recordflow::io
