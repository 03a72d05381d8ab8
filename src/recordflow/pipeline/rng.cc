// xoshiro256** and splitmix64 (constants from their published reference implementations).
#include "rng.h"

#include <random>

namespace recordflow::pipeline::internal {
namespace {

uint64_t SplitMix(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

void Rng::Seed(uint64_t seed) {
  for (uint64_t& s : state) s = SplitMix(seed);
}

uint64_t Rng::Next() {
  const uint64_t result = Rotl(state[1] * 5, 7) * 9;
  const uint64_t t = state[1] << 17;
  state[2] ^= state[0];
  state[3] ^= state[1];
  state[1] ^= state[2];
  state[0] ^= state[3];
  state[2] ^= t;
  state[3] = Rotl(state[3], 45);
  return result;
}

uint64_t Rng::Below(uint64_t n) {
  // Rejects the lowest (2^64 mod n) values so that every residue is equally likely.
  const uint64_t threshold = (0 - n) % n;
  while (true) {
    const uint64_t r = Next();
    if (r >= threshold) return r % n;
  }
}

uint64_t MixSeed(uint64_t seed, uint64_t salt) {
  uint64_t x = seed ^ (salt * 0xd1342543de82ef95ULL + 0x632be59bd9b4e019ULL);
  return SplitMix(x);
}

uint64_t RandomSeed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace recordflow::pipeline::internal
