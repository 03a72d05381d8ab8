// The JSON reader's string escapes: each one-character escape, \u with surrogate pairs, and the
// escapes JsonQuote writes read back to the same bytes.
#include <string>

#include <gtest/gtest.h>

#include "recordflow/core/json.h"

namespace recordflow {
namespace {

std::string ReadString(const std::string& json_literal) {
  Result<JsonValue> v = ParseJson("[" + json_literal + "]", "test");
  EXPECT_TRUE(v.ok()) << json_literal << ": " << v.status().ToString();
  if (!v.ok() || v->items.size() != 1) return "<error>";
  return v->items[0].text;
}

TEST(JsonEscapesTest, EachOneCharacterEscape) {
  EXPECT_EQ(ReadString(R"("\"")"), "\"");
  EXPECT_EQ(ReadString(R"("\\")"), "\\");
  EXPECT_EQ(ReadString(R"("\/")"), "/");
  EXPECT_EQ(ReadString(R"("\b")"), "\b");
  EXPECT_EQ(ReadString(R"("\f")"), "\f");
  EXPECT_EQ(ReadString(R"("\n")"), "\n");
  EXPECT_EQ(ReadString(R"("\r")"), "\r");
  EXPECT_EQ(ReadString(R"("\t")"), "\t");
  EXPECT_EQ(ReadString(R"("a\tb\nc")"), "a\tb\nc");
  EXPECT_EQ(ReadString(R"("\u0041\u00e9")"), "A\xc3\xa9");
}

TEST(JsonEscapesTest, UnknownEscapesAreRefusedWithTheirOffset) {
  for (const char* bad : {R"(["\x"])", R"(["\a"])", R"(["\0"])", R"(["\U0041"])", R"(["\)"}) {
    Result<JsonValue> v = ParseJson(bad, "bad.json");
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(v.status().message().find("bad.json at byte offset"), std::string::npos)
        << v.status().message();
  }
  EXPECT_NE(ParseJson(R"(["\q"])").status().message().find("bad escape"), std::string::npos);
}

TEST(JsonEscapesTest, EveryAsciiCharacterRoundTripsThroughJsonQuote) {
  std::string all;
  for (int c = 1; c < 128; ++c) all.push_back(static_cast<char>(c));
  EXPECT_EQ(ReadString(JsonQuote(all)), all);
}

}  // namespace
}  // namespace recordflow
