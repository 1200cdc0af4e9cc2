// tensor/random.h — deterministic, portable random numbers for init and dropout.
//
// Contract
// - Rng is a SplitMix64 stream: the same seed gives the same numbers on every platform and
//   compiler (unlike std::uniform_real_distribution). uniform() is in [0, 1) with 24 random
//   bits; normal() uses Box-Muller.
// - hash_uniform(seed, index) is a counter-based draw: element i of a dropout mask depends
//   only on (seed, i), never on thread count or split.
// - derive_seed(seed, stream) makes independent sub-seeds (one per parameter, per layer).
// Thread-safety: an Rng is a value; do not share one across threads without a lock.
#pragma once

#include <cstdint>
#include <span>

namespace dtrain {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
inline uint64_t derive_seed(uint64_t seed, uint64_t stream) {
  return splitmix64(seed ^ splitmix64(stream + 0x632be59bd9b4e019ull));
}
inline float hash_uniform(uint64_t seed, uint64_t index) {
  return static_cast<float>(splitmix64(seed + index * 0x9e3779b97f4a7c15ull) >> 40) * 0x1.0p-24f;
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next_u64() {
    state_ += 0x9e3779b97f4a7c15ull;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>(next_u64() >> 40) * 0x1.0p-24f; }
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  float normal();  // mean 0, std 1
  // Integer in [0, n).
  uint64_t below(uint64_t n) { return n == 0 ? 0 : next_u64() % n; }

  void fill_uniform(std::span<float> out, float lo, float hi);
  void fill_normal(std::span<float> out, float mean, float stddev);

 private:
  uint64_t state_;
};

}  // namespace dtrain
