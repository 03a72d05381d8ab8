// Private helpers of the convert layer.
#pragma once

#include <cstdint>
#include <string_view>

namespace recordflow::convert::internal {

// FNV-1a 64 over length-delimited pieces.
class Hasher {
 public:
  void Add(std::string_view bytes);
  void AddInt(int64_t v);
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 0xCBF29CE484222325ull;
};

}  // namespace recordflow::convert::internal
