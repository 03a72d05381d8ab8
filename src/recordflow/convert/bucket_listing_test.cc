// An image folder on an object store (a key prefix), listed through a real S3 server
// (SeaweedFS), gated on RF_TEST_S3_ENDPOINT like io/s3_integration_test.cc (a failure instead
// of a skip with RF_REQUIRE_REMOTE_SERVERS=1): the same classes, order, names and skips a local
// tree gives.
#include <cstdlib>
#include <random>

#include <gtest/gtest.h>

#include "recordflow/convert/plan.h"
#include "recordflow/io/file.h"
#include "recordflow/io/filesystem.h"
#include "recordflow/io/filesystem_internal.h"
#include "recordflow/io/http_client.h"

namespace recordflow::convert {
namespace {

class BucketListingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* endpoint = std::getenv("RF_TEST_S3_ENDPOINT");
    if (endpoint == nullptr || *endpoint == '\0') {
      const char* require = std::getenv("RF_REQUIRE_REMOTE_SERVERS");
      if (require != nullptr && std::string(require) == "1") {
        FAIL() << "RF_TEST_S3_ENDPOINT is not set but RF_REQUIRE_REMOTE_SERVERS=1: no S3 server";
      }
      GTEST_SKIP() << "RF_TEST_S3_ENDPOINT is not set: NO S3 SERVER, remote tests skipped";
    }
    setenv("AWS_ENDPOINT_URL_S3", endpoint, 1);
    bucket_ = "rf-list-" + std::to_string(std::random_device{}());
    const io::internal::S3Config config = io::internal::ResolveS3Config();
    io::internal::HttpResponse response;
    auto attempt = io::internal::HttpClient::Default().Perform(
        io::internal::S3Request(config, "PUT", bucket_, "", "", {}, {}),
        io::GetRemoteOptions().retry, &response);
    ASSERT_TRUE(attempt.status.ok()) << attempt.status.ToString();
    ASSERT_EQ(response.status, 200) << response.body;
  }

  std::string Url(const std::string& key) const { return "s3://" + bucket_ + "/" + key; }

  void Put(const std::string& key, const std::string& data) {
    ASSERT_TRUE(io::WriteStringToFileAtomic(Url(key), data).ok()) << key;
  }

  std::string bucket_;
};

TEST_F(BucketListingTest, PrefixListsClassesInOrderWithSizesAndSkips) {
  Put("img/dog/b.jpg", "bb");
  Put("img/dog/a.jpg", "a");
  Put("img/cat/sub/z.jpg", "zzz");
  Put("img/cat/.hidden.jpg", "h");
  Put("img/cat/x.jpg", "xxxx");
  Put("img/stray.txt", "s");
  Put("img/.git/config", "c");
  Put("imgother/cat/no.jpg", "n");  // shares the prefix string, not the folder

  Result<InputListing> listing = ListImageFolder(Url("img/"));
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  EXPECT_EQ(listing->class_names, (std::vector<std::string>{"cat", "dog"}));
  ASSERT_EQ(listing->items.size(), 4u);
  EXPECT_EQ(listing->items[0].filename, "sub/z.jpg");
  EXPECT_EQ(listing->items[0].path, Url("img/cat/sub/z.jpg"));
  EXPECT_EQ(listing->items[0].size, 3u);
  EXPECT_EQ(listing->items[1].filename, "x.jpg");
  EXPECT_EQ(listing->items[1].size, 4u);
  EXPECT_EQ(listing->items[2].filename, "a.jpg");
  EXPECT_EQ(listing->items[2].labels, (std::vector<int64_t>{1}));
  EXPECT_EQ(listing->items[3].filename, "b.jpg");
  std::vector<std::string> skipped;
  for (const SkippedInput& s : listing->skipped) skipped.push_back(s.path + " " + s.reason);
  EXPECT_EQ(skipped, (std::vector<std::string>{
                         Url("img/.git") + " hidden",
                         Url("img/stray.txt") + " not in a class folder",
                         Url("img/cat/.hidden.jpg") + " hidden",
                     }));
}

TEST_F(BucketListingTest, EmptyPrefixIsNotFoundNamingIt) {
  Result<InputListing> listing = ListImageFolder(Url("nothing-here"));
  ASSERT_FALSE(listing.ok());
  EXPECT_EQ(listing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(listing.status().message().find(Url("nothing-here")), std::string::npos);
}

}  // namespace
}  // namespace recordflow::convert
