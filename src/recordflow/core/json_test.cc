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

}  // namespace
}  // namespace recordflow
