#include "recordflow/io/shard_cache.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <sys/stat.h>

#include "shard_cache_internal.h"

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

int64_t MtimeNs(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
}

// Eviction takes the entry with the oldest mtime. Uses in quick succession (a commit, then a
// hit of another entry) fall inside one tick of the kernel's coarse file clock: each must still
// stamp a time later than every stamp before it, or the entry just used can tie and be evicted.
TEST(ShardCacheTest, EachUseStampsALaterTimeThanAnyUseBeforeIt) {
  const std::string dir = ::testing::TempDir() + "/rf-shard-cache-stamp";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string a = dir + "/a", b = dir + "/b";
  std::ofstream(a) << "a";
  std::ofstream(b) << "b";
  for (int i = 0; i < 500; ++i) {
    const std::string& used = i % 2 == 0 ? a : b;
    const std::string& other = i % 2 == 0 ? b : a;
    internal::MarkUsed(used);
    ASSERT_GT(MtimeNs(used), MtimeNs(other)) << "use " << i;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace recordflow::io
