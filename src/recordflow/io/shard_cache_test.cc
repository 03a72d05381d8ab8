#include "recordflow/io/shard_cache.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

namespace recordflow::io {
namespace {

TEST(ShardCacheTest, ParseByteSizeAcceptsBytesAndPowerOf1024Suffixes) {
  EXPECT_EQ(*ParseByteSize("1000"), 1000u);
  EXPECT_EQ(*ParseByteSize("4K"), 4096u);
  EXPECT_EQ(*ParseByteSize("512M"), 512ull << 20);
  EXPECT_EQ(*ParseByteSize("20G"), 20ull << 30);
  EXPECT_EQ(*ParseByteSize("20GiB"), 20ull << 30);
  EXPECT_EQ(*ParseByteSize("1.5T"), 3ull << 39);
  for (const char* bad : {"", "lots", "-1", "5X", "1e30", "nan", "G"}) {
    Result<uint64_t> r = ParseByteSize(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("not a byte size"), std::string::npos) << bad;
  }
}

TEST(ShardCacheTest, SetShardCacheCreatesTheFolderAndRefusesZeroSize) {
  const ShardCacheOptions saved = GetShardCache();
  const std::string dir = ::testing::TempDir() + "/rf-shard-cache-test/a/b";
  std::filesystem::remove_all(::testing::TempDir() + "/rf-shard-cache-test");
  Status zero = SetShardCache({dir, 0});
  EXPECT_EQ(zero.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(zero.message().find(dir), std::string::npos);
  ASSERT_TRUE(SetShardCache({dir, 1 << 20}).ok());
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  EXPECT_EQ(GetShardCache().dir, dir);
  EXPECT_EQ(GetShardCache().max_bytes, 1u << 20);
  ASSERT_TRUE(SetShardCache(saved).ok());
  std::filesystem::remove_all(::testing::TempDir() + "/rf-shard-cache-test");
}

}  // namespace
}  // namespace recordflow::io
