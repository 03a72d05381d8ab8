#include "recordflow/convert/plan.h"

#include <map>
#include <set>

#include <gtest/gtest.h>

#include "convert_internal.h"
#include "recordflow/core/random.h"

namespace recordflow::convert {
namespace {

InputListing Listing(std::vector<int> per_class, uint64_t size = 1000) {
  InputListing l;
  for (size_t c = 0; c < per_class.size(); ++c) {
    l.class_names.push_back("class" + std::to_string(c));
    for (int i = 0; i < per_class[c]; ++i) {
      InputItem item;
      item.path = "/src/class" + std::to_string(c) + "/" + std::to_string(i) + ".jpg";
      item.filename = std::to_string(i) + ".jpg";
      item.labels = {static_cast<int64_t>(c)};
      item.size = size + i;
      l.items.push_back(item);
    }
  }
  return l;
}

std::vector<uint32_t> Items(const Plan& p, const std::string& split) {
  std::vector<uint32_t> out;
  for (const auto& s : p.shards) {
    if (s.split == split) out.insert(out.end(), s.items.begin(), s.items.end());
  }
  return out;
}

TEST(Rng, FixedSequenceEverywhere) {
  SplitMix64 rng(0);
  // SplitMix64's published first outputs for seed 0.
  EXPECT_EQ(rng.Next(), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(rng.Next(), 0x6E789E6AA1B965F4ull);
  SplitMix64 a(42), b(42);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.Below(7), b.Below(7));
}

TEST(MakePlan, EveryItemOnceStratifiedSplit) {
  ConvertOptions o;
  o.val_fraction = 0.2;
  o.train_shards = 4;
  o.seed = 9;
  auto plan = MakePlan(Listing({10, 20, 7}), o);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  std::vector<uint32_t> all = Items(*plan, "train");
  std::vector<uint32_t> val = Items(*plan, "validation");
  all.insert(all.end(), val.begin(), val.end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), 37u);
  for (uint32_t i = 0; i < 37; ++i) EXPECT_EQ(all[i], i);
  std::map<int64_t, int> val_per_class;
  for (uint32_t i : val) ++val_per_class[plan->listing.items[i].labels[0]];
  EXPECT_EQ(val_per_class[0], 2);  // round(0.2 * 10)
  EXPECT_EQ(val_per_class[1], 4);
  EXPECT_EQ(val_per_class[2], 1);  // round(1.4)
  // 4 train shards of 30 items: 7 or 8 each; validation shards in proportion: round(4*.2/.8) = 1.
  int train_shards = 0, val_shards = 0;
  for (const auto& s : plan->shards) {
    if (s.split == "train") {
      ++train_shards;
      EXPECT_GE(s.items.size(), 7u);
      EXPECT_LE(s.items.size(), 8u);
      EXPECT_EQ(s.file, "train-0000" + std::to_string(s.index) + "-of-00004.tfrecord");
    } else {
      ++val_shards;
    }
  }
  EXPECT_EQ(train_shards, 4);
  EXPECT_EQ(val_shards, 1);
}

TEST(MakePlan, SameSeedSamePlanOtherSeedOtherPlan) {
  ConvertOptions o;
  o.val_fraction = 0.1;
  o.train_shards = 3;
  auto a = MakePlan(Listing({50, 50}), o);
  auto b = MakePlan(Listing({50, 50}), o);
  o.seed = 1;
  auto c = MakePlan(Listing({50, 50}), o);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(Items(*a, "train"), Items(*b, "train"));
  EXPECT_EQ(a->hash, b->hash);
  EXPECT_NE(Items(*a, "train"), Items(*c, "train"));
  EXPECT_NE(a->hash, c->hash);
}

TEST(MakePlan, NoShuffleKeepsClassOrder) {
  ConvertOptions o;
  o.shuffle = false;
  o.train_shards = 2;
  auto plan = MakePlan(Listing({3, 3}), o);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->shards[0].items, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(plan->shards[1].items, (std::vector<uint32_t>{3, 4, 5}));
}

TEST(MakePlan, ShardsBySize) {
  ConvertOptions o;
  o.shard_size = 10000;  // items are ~1000 bytes: 100 items -> ~10 shards of ~10 items
  auto plan = MakePlan(Listing({100}), o);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->shards.size(), 11u);  // 104950 bytes / 10000, rounded up
  for (const auto& s : plan->shards) {
    EXPECT_GE(s.items.size(), 8u);
    EXPECT_LE(s.items.size(), 11u);
  }
  // Never more shards than items, never fewer than one.
  o.shard_size = 1;
  auto tiny = MakePlan(Listing({3}), o);
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(tiny->shards.size(), 3u);
  auto empty = MakePlan(Listing({}), o);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->shards.size(), 1u);
}

TEST(MakePlan, BadOptions) {
  ConvertOptions o;
  o.val_fraction = 1.0;
  EXPECT_EQ(MakePlan(Listing({1}), o).status().code(), StatusCode::kInvalidArgument);
  o.val_fraction = -0.1;
  EXPECT_EQ(MakePlan(Listing({1}), o).status().code(), StatusCode::kInvalidArgument);
}

TEST(ShardFileName, Compression) {
  EXPECT_EQ(ShardFileName("validation", 3, 128, format::Compression::kGzip),
            "validation-00003-of-00128.tfrecord.gz");
  EXPECT_EQ(ShardFileName("train", 0, 1, format::Compression::kNone),
            "train-00000-of-00001.tfrecord");
}

TEST(SanitizePathComponent, NothingEscapes) {
  EXPECT_EQ(SanitizePathComponent("cat.jpg", "x"), "cat.jpg");
  EXPECT_EQ(SanitizePathComponent("../../etc/passwd", "x"), "passwd");
  EXPECT_EQ(SanitizePathComponent("/abs/path.jpg", "x"), "path.jpg");
  EXPECT_EQ(SanitizePathComponent("..", "x"), "x");
  EXPECT_EQ(SanitizePathComponent(".", "x"), "x");
  EXPECT_EQ(SanitizePathComponent("", "x"), "x");
  EXPECT_EQ(SanitizePathComponent("dir/", "x"), "x");
  EXPECT_EQ(SanitizePathComponent("..\\..\\win.ini", "x"), "win.ini");
  EXPECT_EQ(SanitizePathComponent(std::string("a\0b", 3), "x"), "a_b");
  EXPECT_EQ(SanitizePathComponent("c:evil", "x"), "c_evil");
  EXPECT_EQ(SanitizePathComponent("caf\xC3\xA9\xFF.jpg", "x"), "caf\xC3\xA9_.jpg");
  // Overlong forms and surrogates are not UTF-8 either (the one validator's rules).
  EXPECT_EQ(SanitizePathComponent("a\xE0\x80\xAF.jpg", "x"), "a___.jpg");
  EXPECT_EQ(SanitizePathComponent("a\xED\xA0\x80.jpg", "x"), "a___.jpg");
  EXPECT_EQ(SanitizePathComponent(std::string(500, 'a'), "x").size(), 200u);
}

TEST(ConvertOptionNames, ParseAndNameRoundTrip) {
  for (auto p : {NonJpegPolicy::kTranscode, NonJpegPolicy::kKeep}) {
    EXPECT_EQ(*ParseNonJpegPolicy(NonJpegPolicyName(p)), p);
  }
  for (auto v : {VerifyLevel::kHeader, VerifyLevel::kStructure, VerifyLevel::kDecode}) {
    EXPECT_EQ(*ParseVerifyLevel(VerifyLevelName(v)), v);
  }
  Result<VerifyLevel> bad = ParseVerifyLevel("full");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'full'"), std::string::npos);
  EXPECT_FALSE(ParseNonJpegPolicy("Keep").ok());
}

}  // namespace
}  // namespace recordflow::convert
