#include "recordflow/core/random.h"

namespace recordflow {

uint64_t SplitMix64::Next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t SplitMix64::Below(uint64_t n) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t v;
  do {
    v = Next();
  } while (v >= limit);
  return v % n;
}

double SplitMix64::Uniform(double lo, double hi) {
  const double u = static_cast<double>(Next() >> 11) * 0x1.0p-53;
  return lo + (hi - lo) * u;
}

__extension__ typedef unsigned __int128 Uint128;

int64_t SplitMix64::UniformInt(int64_t lo, int64_t hi) {
  const uint64_t n = static_cast<uint64_t>(hi - lo);
  return lo + static_cast<int64_t>((static_cast<Uint128>(Next()) * n) >> 64);
}

}  // namespace recordflow
