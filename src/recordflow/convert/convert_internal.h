// Private helpers of the convert layer.
#pragma once

#include <cctype>
#include <cstddef>
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

// Whether `s` ends with `lower_suffix` in any letter case (`lower_suffix` is lower case):
// input lists and manifests are recognized by extension, ".CSV" as ".csv".
inline bool EndsWithCaseless(std::string_view s, std::string_view lower_suffix) {
  if (s.size() < lower_suffix.size()) return false;
  const std::string_view tail = s.substr(s.size() - lower_suffix.size());
  for (size_t i = 0; i < lower_suffix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(tail[i])) != lower_suffix[i]) return false;
  }
  return true;
}

}  // namespace recordflow::convert::internal
