// data/rng.h — a small seeded random generator whose stream is the same on every platform.
//
// Contract
// - Rng is xoshiro256** seeded through SplitMix64. The standard library's engines are
//   portable but its distributions (uniform_int_distribution, shuffle, gamma_distribution)
//   are not, so every distribution dtrain needs is written here on top of next_u64(): the
//   same seed gives the same shuffles, partitions and initial weights on any compiler.
// - state()/set_state() expose the whole 256-bit state so a checkpoint can resume the exact
//   stream.
// - Rng::derive(seed, a, b) makes an independent stream for a (purpose, index) pair, e.g. the
//   permutation of epoch 7, without advancing any other generator.
// Thread-safety: a value type; one Rng per thread.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

namespace dtrain::data {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { seed_with(seed); }

  static Rng derive(uint64_t seed, uint64_t a, uint64_t b = 0) {
    uint64_t x = seed;
    uint64_t h = splitmix(x) ^ (a * 0x9E3779B97F4A7C15ull);
    h = splitmix(h) ^ (b * 0xC2B2AE3D27D4EB4Full);
    return Rng(splitmix(h));
  }

  uint64_t next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, n), unbiased (Lemire's multiply-and-reject). n must be > 0.
  uint64_t below(uint64_t n) {
    unsigned __int128 m = static_cast<unsigned __int128>(next_u64()) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next_u64()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

  // Standard normal by the Box-Muller transform (one value per call; the pair's twin is
  // dropped so the state stays a plain 256-bit value).
  double normal() {
    double u1 = uniform();
    double u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

  // Gamma(shape, 1) by Marsaglia and Tsang (2000); shape < 1 uses the boost
  // Gamma(a) = Gamma(a + 1) * U^(1/a).
  double gamma(double shape) {
    if (shape < 1.0) {
      double u = uniform();
      if (u < 1e-300) u = 1e-300;
      return gamma(shape + 1.0) * std::pow(u, 1.0 / shape);
    }
    const double d = shape - 1.0 / 3.0;
    const double c = 1.0 / std::sqrt(9.0 * d);
    for (;;) {
      double x = normal();
      double v = 1.0 + c * x;
      if (v <= 0) continue;
      v = v * v * v;
      double u = uniform();
      if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
      if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
    }
  }

  std::array<uint64_t, 4> state() const { return s_; }
  void set_state(const std::array<uint64_t, 4>& s) { s_ = s; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix(uint64_t& x) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  void seed_with(uint64_t seed) {
    uint64_t x = seed;
    for (auto& w : s_) w = splitmix(x);
  }

  std::array<uint64_t, 4> s_{};
};

}  // namespace dtrain::data
