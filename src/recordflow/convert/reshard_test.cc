#include "recordflow/convert/reshard.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "recordflow/format/record_index.h"
#include "recordflow/format/record_reader.h"
#include "recordflow/format/record_test_util.h"
#include "recordflow/format/record_writer.h"
#include "recordflow/io/file.h"

namespace recordflow::convert {
namespace {

namespace fs = std::filesystem;
using format::testing::MakeTempDir;
using format::testing::Ok;

// Payloads of varied sizes (0 to a few KB), all distinct.
std::string Payload(int file, int i) {
  std::string s = "f" + std::to_string(file) + "r" + std::to_string(i) + ":";
  s.append(static_cast<size_t>((i * 37 + file * 11) % 3000), static_cast<char>('a' + i % 26));
  return s;
}

std::vector<std::string> ReadRecords(const std::string& path) {
  auto reader = Ok(format::RecordReader::Open(path));
  return format::testing::ReadAll(*reader).records;
}

std::string Slurp(const std::string& path) { return Ok(io::ReadFileToString(path)); }

struct Inputs {
  std::string dir;
  std::vector<std::string> files;
  std::vector<std::string> records;  // in input order
};

// Two uncompressed files and a GZIP one.
Inputs MakeInputs() {
  Inputs in;
  in.dir = MakeTempDir();
  const int counts[] = {23, 0, 17, 31};
  for (int f = 0; f < 4; ++f) {
    std::vector<std::string> recs;
    for (int i = 0; i < counts[f]; ++i) recs.push_back(Payload(f, i));
    const std::string path =
        in.dir + "/in" + std::to_string(f) + (f == 2 ? ".tfrecord.gz" : ".tfrecord");
    format::testing::WriteRecordsOrFail(path, recs);
    in.files.push_back(path);
    in.records.insert(in.records.end(), recs.begin(), recs.end());
  }
  return in;
}

// Options for `num_shards` shards, without fsync (these tests do not survive power loss);
// with `shuffle_seed`, the records are shuffled with that seed.
ReshardOptions ShardOptions(int num_shards, std::optional<uint64_t> shuffle_seed = std::nullopt) {
  ReshardOptions o;
  o.num_shards = num_shards;
  o.shuffle = shuffle_seed.has_value();
  o.seed = shuffle_seed.value_or(0);
  o.sync = false;
  return o;
}

std::vector<std::string> AllShardRecords(const std::string& dst, const ReshardSummary& s) {
  std::vector<std::string> out;
  for (const ReshardShard& shard : s.shards) {
    std::vector<std::string> r = ReadRecords(dst + "/" + shard.file);
    EXPECT_EQ(r.size(), shard.records) << shard.file;
    out.insert(out.end(), r.begin(), r.end());
  }
  return out;
}

TEST(ReshardTest, ShardsHoldTheRecordsInInputOrderWithIndexes) {
  const Inputs in = MakeInputs();
  const std::string dst = in.dir + "/out";
  const ReshardOptions o = ShardOptions(4);
  const ReshardSummary s = Ok(Reshard(in.files, dst, o));
  ASSERT_EQ(s.shards.size(), 4u);
  EXPECT_EQ(s.records, 71u);
  EXPECT_EQ(s.shards[0].file, "shard-00000-of-00004.tfrecord");
  for (const ReshardShard& shard : s.shards) {
    EXPECT_TRUE(shard.records == 17 || shard.records == 18) << shard.records;
    // The index is the one `recordflow index` would build.
    const std::string path = dst + "/" + shard.file;
    EXPECT_EQ(Ok(format::ReadIndexFile(path + ".idx")), Ok(format::BuildIndex(path)));
    EXPECT_EQ(shard.bytes, fs::file_size(path));
  }
  EXPECT_EQ(AllShardRecords(dst, s), in.records);
}

TEST(ReshardTest, ShuffleIsASeededPermutationAcrossShards) {
  const Inputs in = MakeInputs();
  ReshardOptions o = ShardOptions(3, /*shuffle_seed=*/42);
  const ReshardSummary a = Ok(Reshard(in.files, in.dir + "/a", o));
  const ReshardSummary b = Ok(Reshard(in.files, in.dir + "/b", o));
  o.seed = 43;
  const ReshardSummary c = Ok(Reshard(in.files, in.dir + "/c", o));
  const std::vector<std::string> ra = AllShardRecords(in.dir + "/a", a);
  EXPECT_NE(ra, in.records);
  std::vector<std::string> sorted_a = ra, sorted_in = in.records;
  std::sort(sorted_a.begin(), sorted_a.end());
  std::sort(sorted_in.begin(), sorted_in.end());
  EXPECT_EQ(sorted_a, sorted_in);  // the same multiset, byte for byte
  for (const ReshardShard& shard : a.shards) {
    EXPECT_EQ(Slurp(in.dir + "/a/" + shard.file), Slurp(in.dir + "/b/" + shard.file));
  }
  EXPECT_NE(AllShardRecords(in.dir + "/c", c), ra);
}

TEST(ReshardTest, CompressionChangeWritesGzipShardsWithoutIndex) {
  const Inputs in = MakeInputs();
  const std::string dst = in.dir + "/gz";
  ReshardOptions o = ShardOptions(2);
  o.compression = format::Compression::kGzip;
  const ReshardSummary s = Ok(Reshard(in.files, dst, o));
  EXPECT_EQ(s.shards[1].file, "shard-00001-of-00002.tfrecord.gz");
  EXPECT_FALSE(fs::exists(dst + "/" + s.shards[1].file + ".idx"));
  EXPECT_EQ(AllShardRecords(dst, s), in.records);
  // And back to uncompressed from the GZIP shards.
  std::vector<std::string> gz;
  for (const auto& shard : s.shards) gz.push_back(dst + "/" + shard.file);
  const ReshardSummary t = Ok(Reshard(gz, in.dir + "/plain", ShardOptions(5)));
  EXPECT_EQ(AllShardRecords(in.dir + "/plain", t), in.records);
}

TEST(ReshardTest, ResumeKeepsWholeShardsAndMatchesAnUninterruptedRun) {
  const Inputs in = MakeInputs();
  ReshardOptions o = ShardOptions(5, /*shuffle_seed=*/7);
  const std::string whole = in.dir + "/whole", cut = in.dir + "/cut";
  const ReshardSummary full = Ok(Reshard(in.files, whole, o));
  Ok(Reshard(in.files, cut, o));
  // What a kill leaves: shards 0 and 2 published, shard 2's index not yet, shard 3 half
  // written under its temporary name, the rest never started.
  for (int k : {1, 3, 4}) fs::remove(cut + "/" + full.shards[k].file);
  for (int k : {1, 2, 3, 4}) fs::remove(cut + "/" + full.shards[k].file + ".idx");
  { std::ofstream(cut + "/." + full.shards[3].file + ".tmp-123-abcdef01") << "partial"; }
  struct stat before {};
  ASSERT_EQ(::stat((cut + "/" + full.shards[0].file).c_str(), &before), 0);

  // Without --resume the earlier run is not touched.
  Result<ReshardSummary> refused = Reshard(in.files, cut, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(refused.status().message().find(cut), std::string::npos);
  // Nor with other options.
  ReshardOptions other = o;
  other.resume = true;
  other.seed = 8;
  Result<ReshardSummary> mismatch = Reshard(in.files, cut, other);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.status().code(), StatusCode::kFailedPrecondition);

  o.resume = true;
  const ReshardSummary resumed = Ok(Reshard(in.files, cut, o));
  EXPECT_EQ(resumed.resumed_shards, 1u);  // shard 2 had no index yet: written again
  EXPECT_TRUE(resumed.shards[0].resumed);
  EXPECT_FALSE(resumed.shards[2].resumed);
  struct stat after {};
  ASSERT_EQ(::stat((cut + "/" + full.shards[0].file).c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino);  // kept, not rewritten
  for (const ReshardShard& shard : full.shards) {
    EXPECT_EQ(Slurp(cut + "/" + shard.file), Slurp(whole + "/" + shard.file)) << shard.file;
    EXPECT_EQ(Slurp(cut + "/" + shard.file + ".idx"), Slurp(whole + "/" + shard.file + ".idx"));
  }
  for (const auto& entry : fs::directory_iterator(cut)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << entry.path();
  }
}

TEST(ReshardTest, CorruptInputFailsBeforeAnyShardIsPublished) {
  Inputs in = MakeInputs();
  std::string bytes = Slurp(in.files[0]);
  bytes[bytes.size() / 2] ^= 0x40;
  { std::ofstream(in.files[0], std::ios::binary | std::ios::trunc) << bytes; }
  const std::string dst = in.dir + "/bad";
  ReshardOptions o;
  o.num_shards = 2;
  Result<ReshardSummary> r = Reshard(in.files, dst, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find(in.files[0]), std::string::npos) << r.status().message();
  EXPECT_FALSE(fs::exists(dst + "/shard-00000-of-00002.tfrecord"));

  Result<ReshardSummary> missing = Reshard({in.dir + "/nope.tfrecord"}, dst, o);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.tfrecord"), std::string::npos);
  o.num_shards = 0;
  EXPECT_EQ(Reshard(in.files, dst, o).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace recordflow::convert
