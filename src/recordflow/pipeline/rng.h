// The random number generator every seeded stage uses, and seed mixing.
#pragma once

#include <cstdint>

namespace recordflow::pipeline::internal {

// xoshiro256** seeded through splitmix64: small state that saves as four words, and the same
// sequence on every platform (std::mt19937_64 distributions are not portable).
class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { Seed(seed); }
  void Seed(uint64_t seed);
  uint64_t Next();
  // Uniform in [0, n) without modulo bias. n > 0.
  uint64_t Below(uint64_t n);
  uint64_t state[4] = {};
};

// Mixes a base seed with a number (epoch, stage) into a new seed.
uint64_t MixSeed(uint64_t seed, uint64_t salt);
// A seed from the OS, for stages without one.
uint64_t RandomSeed();

}  // namespace recordflow::pipeline::internal
