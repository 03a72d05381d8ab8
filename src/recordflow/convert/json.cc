#include <string>

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

}  // namespace recordflow::convert::internal
