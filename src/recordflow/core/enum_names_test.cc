#include "recordflow/core/enum_names.h"

#include <gtest/gtest.h>

namespace recordflow {
namespace {

enum class Fruit { kApple, kPear, kPlum, kFig };

// kFig has no row: a value the table does not name.
constexpr EnumName<Fruit> kFruitNames[] = {
    {Fruit::kApple, "apple"},
    {Fruit::kPear, "pear"},
    {Fruit::kPlum, "plum"},
    {Fruit::kApple, "malus"},  // an alias
};

TEST(EnumNamesTest, NameOfTakesTheFirstRowOrTheFallback) {
  EXPECT_EQ(NameOf(kFruitNames, Fruit::kApple), "apple");
  EXPECT_EQ(NameOf(kFruitNames, Fruit::kPlum), "plum");
  EXPECT_EQ(NameOf(kFruitNames, Fruit::kFig), "");
  EXPECT_EQ(NameOf(kFruitNames, Fruit::kFig, "?"), "?");
  static_assert(NameOf(kFruitNames, Fruit::kPear) == "pear");
}

TEST(EnumNamesTest, FindByNameIsExactAndTakesAliases) {
  EXPECT_EQ(FindByName(kFruitNames, "pear"), Fruit::kPear);
  EXPECT_EQ(FindByName(kFruitNames, "malus"), Fruit::kApple);
  EXPECT_EQ(FindByName(kFruitNames, "Pear"), std::nullopt);
  EXPECT_EQ(FindByName(kFruitNames, ""), std::nullopt);
  EXPECT_EQ(FindByName(kFruitNames, "pea"), std::nullopt);
  static_assert(FindByName(kFruitNames, "plum") == Fruit::kPlum);
}

TEST(EnumNamesTest, NameListQuotesEachValueOnceAndSkipsAliases) {
  EXPECT_EQ(NameList(kFruitNames, "'"), "'apple', 'pear' or 'plum'");
  EXPECT_EQ(NameList(kFruitNames, ""), "apple, pear or plum");
  constexpr EnumName<Fruit> kOne[] = {{Fruit::kFig, "fig"}};
  EXPECT_EQ(NameList(kOne, "\""), "\"fig\"");
  constexpr EnumName<Fruit> kTwo[] = {{Fruit::kFig, "fig"}, {Fruit::kPear, "pear"}};
  EXPECT_EQ(NameList(kTwo, "'"), "'fig' or 'pear'");
}

TEST(EnumNamesTest, ParseNameNamesTheTextAndTheChoices) {
  Result<Fruit> pear = ParseName(kFruitNames, "pear", "fruit");
  ASSERT_TRUE(pear.ok()) << pear.status().ToString();
  EXPECT_EQ(*pear, Fruit::kPear);
  Result<Fruit> bad = ParseName(kFruitNames, "kiwi", "fruit");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "unknown fruit 'kiwi': expected 'apple', 'pear' or 'plum'");
}

}  // namespace
}  // namespace recordflow
