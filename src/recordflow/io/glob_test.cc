#include "recordflow/io/glob.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace recordflow::io {
namespace {

using Paths = std::vector<std::string>;

std::string MakeTempDir() {
  std::string tmpl = ::testing::TempDir() + "rf_glob_test_XXXXXX";
  EXPECT_NE(mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

void Touch(const std::string& path) { std::ofstream(path) << ""; }

TEST(ExpandGlobTest, MatchesAreSortedBytewiseAndHiddenNamesNeedALiteralDot) {
  const std::string d = MakeTempDir();
  // Created out of order; "B" sorts before "a" bytewise, as Python's sorted() puts it.
  for (const char* name : {"part-2.tfrecord", "part-10.tfrecord", "a.tfrecord", "B.tfrecord",
                           ".hidden.tfrecord", "part-1.tfrecord.idx"}) {
    Touch(d + "/" + name);
  }
  auto all = ExpandGlob(d + "/*.tfrecord");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(*all, (Paths{d + "/B.tfrecord", d + "/a.tfrecord", d + "/part-10.tfrecord",
                         d + "/part-2.tfrecord"}));
  auto hidden = ExpandGlob(d + "/.*.tfrecord");
  ASSERT_TRUE(hidden.ok());
  EXPECT_EQ(*hidden, (Paths{d + "/.hidden.tfrecord"}));
  auto classes = ExpandGlob(d + "/part-?.tfrecord*");
  ASSERT_TRUE(classes.ok());
  EXPECT_EQ(*classes, (Paths{d + "/part-1.tfrecord.idx", d + "/part-2.tfrecord"}));
  auto brackets = ExpandGlob(d + "/[aB].tfrecord");
  ASSERT_TRUE(brackets.ok());
  EXPECT_EQ(*brackets, (Paths{d + "/B.tfrecord", d + "/a.tfrecord"}));
}

TEST(ExpandGlobTest, APlainPathIsKeptUncheckedAndAnEmptyPatternIsNotFoundNamingIt) {
  EXPECT_FALSE(IsGlobPattern("/data/train-00000.tfrecord"));
  EXPECT_TRUE(IsGlobPattern("/data/train-*"));
  EXPECT_TRUE(IsGlobPattern("x?"));
  EXPECT_TRUE(IsGlobPattern("[ab]"));
  auto plain = ExpandGlob("/no/such/dir/file.tfrecord");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(*plain, (Paths{"/no/such/dir/file.tfrecord"}));

  const std::string d = MakeTempDir();
  auto none = ExpandGlob(d + "/nothing-*.tfrecord");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(none.status().message(), "no files match '" + d + "/nothing-*.tfrecord'");
  auto missing_dir = ExpandGlob("/no/such/dir/*.tfrecord");
  EXPECT_EQ(missing_dir.status().code(), StatusCode::kNotFound);
}

TEST(ExpandGlobTest, ExpandGlobsKeepsTheOrderOfThePatternsAndFailsOnTheFirstEmptyOne) {
  const std::string d = MakeTempDir();
  for (const char* name : {"x-1", "x-2", "y-1"}) Touch(d + "/" + name);
  auto out = ExpandGlobs({d + "/y-*", "plain", d + "/x-*"});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, (Paths{d + "/y-1", "plain", d + "/x-1", d + "/x-2"}));
  auto bad = ExpandGlobs({d + "/x-*", d + "/z-*", d + "/w-*"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "no files match '" + d + "/z-*'");
  auto empty = ExpandGlobs({});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

}  // namespace
}  // namespace recordflow::io
