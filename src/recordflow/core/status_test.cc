#include "recordflow/core/status.h"

#include <cerrno>

#include <gtest/gtest.h>

namespace recordflow {
namespace {

TEST(StatusTest, OkIsCheapAndEmpty) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = DataLossError("bad crc at offset 12");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.ToString(), "DataLoss: bad crc at offset 12");
  Status copy = s;  // NOLINT(performance-unnecessary-copy-initialization): the copy is the test
  EXPECT_EQ(copy, s);
  EXPECT_EQ(s.WithContext("reading x").message(), "reading x: bad crc at offset 12");
}

TEST(StatusTest, ErrnoMapping) {
  EXPECT_EQ(ErrnoToStatus(ENOENT, "open", "/x").code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrnoToStatus(EACCES, "open", "/x").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoToStatus(ENOSPC, "write", "/x").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrnoToStatus(EIO, "read", "/x").code(), StatusCode::kIOError);
  EXPECT_NE(ErrnoToStatus(ENOENT, "open", "/some/path").message().find("/some/path"),
            std::string::npos);
}

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgumentError("odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  RF_ASSIGN_OR_RETURN(int h, Half(x));
  RF_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(ResultTest, PropagatesErrors) {
  EXPECT_EQ(*Quarter(8), 2);
  Result<int> r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace recordflow
