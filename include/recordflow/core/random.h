// recordflow's seedable generator. Convert's split and shard plan, reshard's permutation and
// the vision ops' per-element augmentation all draw from it, so the same seed gives the same
// files and the same crops on every platform and standard library (std::shuffle and the std::
// distributions are not specified exactly). The pipeline's shuffle uses xoshiro256** instead
// (pipeline_internal.h): its state is saved in checkpoints as four words.
//
// Thread safety: thread-compatible (one generator per thread or per element).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace recordflow {

// SplitMix64 (Steele, Lea and Flood). Every method's sequence is part of recorded behaviour
// (convert's output for a seed, the crops of a seeded pipeline): do not change them.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t Next();
  // Uniform in [0, n), n > 0, by rejection: no modulo bias. Used for permutations.
  uint64_t Below(uint64_t n);
  // Uniform in [lo, hi) from the top 53 bits.
  double Uniform(double lo, double hi);
  // Integer in [lo, hi) (hi > lo) by 128-bit multiply-shift: one draw, bias < n / 2^64.
  int64_t UniformInt(int64_t lo, int64_t hi);

 private:
  uint64_t state_;
};

// Fisher-Yates with SplitMix64::Below, from the back.
template <typename T>
void Shuffle(std::vector<T>* v, SplitMix64* rng) {
  for (size_t i = v->size(); i > 1; --i) {
    const size_t j = rng->Below(i);
    std::swap((*v)[i - 1], (*v)[j]);
  }
}

}  // namespace recordflow
