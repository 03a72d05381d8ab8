// Private helpers of the convert layer.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace recordflow::convert::internal {

// SplitMix64: small, fast, and the same sequence on every platform (std::shuffle and the
// std distributions are not specified exactly, so plans made with them could differ between
// standard libraries).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  // Uniform in [0, n), n > 0.
  uint64_t Below(uint64_t n);

 private:
  uint64_t state_;
};

// Fisher-Yates with Rng.
template <typename T>
void Shuffle(std::vector<T>* v, Rng* rng) {
  for (size_t i = v->size(); i > 1; --i) {
    const size_t j = rng->Below(i);
    std::swap((*v)[i - 1], (*v)[j]);
  }
}

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
