#include <string>
#include <vector>

#include "json_internal.h"

namespace recordflow::convert::internal {

std::string ShardJson(std::string_view file, uint64_t records, uint64_t bytes, bool resumed) {
  return JsonWriter(JsonLayout::kSpaced)
      .AddString("file", file)
      .AddUint("records", records)
      .AddUint("bytes", bytes)
      .AddBool("resumed", resumed)
      .str();
}

std::string SkippedJson(const std::vector<SkippedInput>& skipped, std::string_view path_key) {
  std::vector<std::string> items;
  items.reserve(skipped.size());
  for (const SkippedInput& s : skipped) {
    items.push_back(JsonWriter(JsonLayout::kSpaced)
                        .AddString(path_key, s.path)
                        .AddString("reason", s.reason)
                        .str());
  }
  return JsonArray(items, JsonLayout::kSpaced);
}

}  // namespace recordflow::convert::internal
