// Known-answer tests from AWS's published SigV4 material, and the URL/backoff helpers.
#include "recordflow/io/sigv4.h"

#include <gtest/gtest.h>

#include "recordflow/io/filesystem.h"

namespace recordflow::io::internal {
namespace {

// AWS SigV4 test suite, "get-vanilla" (credentials AKIDEXAMPLE, us-east-1, service "service").
TEST(SigV4Test, TestSuiteGetVanilla) {
  SigV4Request r;
  r.method = "GET";
  r.canonical_uri = "/";
  r.headers = {{"host", "example.amazonaws.com"}, {"x-amz-date", "20150830T123600Z"}};
  r.payload_hash = HexSha256("");
  AwsCredentials c{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", ""};
  EXPECT_EQ(CanonicalRequest(r),
            "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
            "host;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(StringToSign(r, "20150830T123600Z", "20150830/us-east-1/service/aws4_request"),
            "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
            "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63");
  EXPECT_EQ(SigV4Authorization(r, c, "20150830T123600Z", "us-east-1", "service"),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
            "SignedHeaders=host;x-amz-date, "
            "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
}

// The S3 documentation's "GET Object" example (first 10 bytes of examplebucket/test.txt).
TEST(SigV4Test, S3GetObjectExample) {
  SigV4Request r;
  r.method = "GET";
  r.canonical_uri = "/test.txt";
  const std::string empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
  r.headers = {{"host", "examplebucket.s3.amazonaws.com"},
               {"range", "bytes=0-9"},
               {"x-amz-content-sha256", empty},
               {"x-amz-date", "20130524T000000Z"}};
  r.payload_hash = empty;
  AwsCredentials c{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""};
  EXPECT_EQ(HexSha256(CanonicalRequest(r)),
            "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  EXPECT_EQ(SigV4Signature(r, c, "20130524T000000Z", "us-east-1", "s3"),
            "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4Test, HeaderValuesAreTrimmedAndSorted) {
  SigV4Request r;
  r.method = "GET";
  r.canonical_uri = "/";
  r.headers = {{"x-b", "  two   words "}, {"host", "h"}};
  r.payload_hash = "UNSIGNED-PAYLOAD";
  EXPECT_EQ(CanonicalRequest(r), "GET\n/\n\nhost:h\nx-b:two words\n\nhost;x-b\nUNSIGNED-PAYLOAD");
}

TEST(SigV4Test, UriEncodeKeepsUnreservedAndOptionallySlash) {
  EXPECT_EQ(UriEncode("a b/c~d_e.f-g+h=", true), "a%20b/c~d_e.f-g%2Bh%3D");
  EXPECT_EQ(UriEncode("a/b", false), "a%2Fb");
}

TEST(UrlTest, ParsesSchemesBucketsAndKeys) {
  Url u = ParseUrl("s3://bucket/a/b.tfrecord");
  EXPECT_EQ(u.scheme, "s3");
  EXPECT_EQ(u.authority, "bucket");
  EXPECT_EQ(u.key, "a/b.tfrecord");
  u = ParseUrl("https://host:8080/x");
  EXPECT_EQ(u.scheme, "https");
  EXPECT_EQ(u.authority, "host:8080");
  EXPECT_EQ(u.key, "x");
  EXPECT_EQ(ParseUrl("file:///tmp/x").key, "/tmp/x");
  EXPECT_EQ(ParseUrl("./dir/s3://odd").scheme, "");
  EXPECT_TRUE(IsRemotePath("s3://b/k"));
  EXPECT_TRUE(IsRemotePath("http://h/k"));
  EXPECT_FALSE(IsRemotePath("/tmp/s3://x"));
  EXPECT_FALSE(IsRemotePath("file:///tmp/x"));
  EXPECT_FALSE(IsRemotePath("relative/path"));
  auto fs = FileSystemForPath("hdfs://nn/x");
  ASSERT_FALSE(fs.ok());
  EXPECT_EQ(fs.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(fs.status().message().find("hdfs"), std::string::npos);
}

TEST(BackoffTest, ExponentialCappedWithJitterInUpperHalf) {
  RetryOptions o;
  o.initial_backoff = std::chrono::milliseconds(100);
  o.max_backoff = std::chrono::milliseconds(1000);
  EXPECT_EQ(BackoffDelay(o, 0, 0.0).count(), 50);
  EXPECT_EQ(BackoffDelay(o, 0, 1.0).count(), 100);
  EXPECT_EQ(BackoffDelay(o, 2, 1.0).count(), 400);
  EXPECT_EQ(BackoffDelay(o, 3, 0.5).count(), 600);
  EXPECT_EQ(BackoffDelay(o, 10, 1.0).count(), 1000);
  EXPECT_EQ(BackoffDelay(o, 10, 0.0).count(), 500);
}

}  // namespace
}  // namespace recordflow::io::internal
