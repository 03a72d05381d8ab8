#include "recordflow/core/json.h"

#include <gtest/gtest.h>

#include "recordflow/core/utf8.h"

namespace recordflow {
namespace {

TEST(Utf8, AcceptsShortestFormsOnly) {
  EXPECT_TRUE(IsValidUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));   // U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\xAF"));      // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate U+D800
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\x80"));              // stray continuation
  EXPECT_FALSE(IsValidUtf8("\xE2\x82"));          // truncated
  EXPECT_EQ(Utf8SequenceLength("a\xE2\x82\xAC", 1), 3u);
  EXPECT_EQ(Utf8SequenceLength("\xED\xA0\x80", 0), 0u);
}

TEST(JsonQuote, EscapesAndReplacesMalformedBytes) {
  EXPECT_EQ(JsonQuote("a\"b\\c\n\t\x01\x7f"), "\"a\\\"b\\\\c\\n\\t\\u0001\\u007f\"");
  EXPECT_EQ(JsonQuote("caf\xC3\xA9"), "\"caf\xC3\xA9\"");
  // Every byte of a surrogate or overlong sequence is replaced, as in the CLI's output.
  EXPECT_EQ(JsonQuote("\xED\xA0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");
  EXPECT_EQ(JsonQuote("x\xFF"), "\"x\\ufffd\"");
}

TEST(JsonWriter, CompactAndSpacedLayouts) {
  EXPECT_EQ(JsonWriter().AddString("a", "x").AddUint("b", 2).AddBool("c", true).str(),
            "{\"a\":\"x\",\"b\":2,\"c\":true}");
  EXPECT_EQ(JsonWriter(JsonLayout::kSpaced)
                .AddInt("a", -1)
                .AddDouble("b", 0.5)
                .AddDouble("c", 1.0 / 0.0)
                .AddRaw("d", JsonArray({"1", "2"}, JsonLayout::kSpaced))
                .str(),
            "{\"a\": -1, \"b\": 0.5, \"c\": null, \"d\": [1, 2]}");
  EXPECT_EQ(JsonArray({"1", "2"}), "[1,2]");
  EXPECT_EQ(JsonWriter().str(), "{}");
}

// The one reader: convert's files and manifests, GCS answers and key files.
TEST(JsonReaderTest, ParsesNestedValuesEscapesAndRejectsGarbage) {
  auto v = ParseJson(
      R"({"items":[{"name":"a\/b\u00e9\ud83d\ude00"},{"name":"c"}],"n":"12","k":7,"t":true,"z":null})",
      "test");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  const JsonValue* items = v->Find("items");
  ASSERT_NE(items, nullptr);
  ASSERT_EQ(items->items.size(), 2u);
  EXPECT_EQ(items->items[0].FindText("name"), "a/b\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(v->FindText("n"), "12");
  EXPECT_EQ(v->FindText("k"), "7");
  EXPECT_EQ(v->Find("k")->AsInt(), 7);
  EXPECT_EQ(v->FindText("t"), "");
  EXPECT_EQ(v->FindText("missing"), "");
  EXPECT_TRUE(v->Find("t")->boolean);
  EXPECT_EQ(v->Find("z")->type, JsonValue::Type::kNull);
  auto bad = ParseJson(R"({"a": [1, 2)", "answer.json");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("invalid JSON in answer.json at byte offset 11"),
            std::string::npos)
      << bad.status().message();
  EXPECT_NE(ParseJson("[1] x").status().message().find("at byte offset 4: trailing"),
            std::string::npos);
}

}  // namespace
}  // namespace recordflow
