// tensor/random.cc — Box-Muller normals and bulk fills for Rng.
#include "tensor/random.h"

#include <cmath>

namespace dtrain {

// Box-Muller: two uniforms u1 in (0, 1], u2 in [0, 1) give r = sqrt(-2 ln u1) and angle
// 2 pi u2; we use the cosine branch only, so each call consumes exactly two draws (simple
// and reproducible, at twice the cost of caching the sine branch).
float Rng::normal() {
  double u1 = (static_cast<double>(next_u64() >> 11) + 1.0) * 0x1.0p-53;
  double u2 = static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

void Rng::fill_uniform(std::span<float> out, float lo, float hi) {
  for (float& v : out) v = uniform(lo, hi);
}

void Rng::fill_normal(std::span<float> out, float mean, float stddev) {
  for (float& v : out) v = mean + stddev * normal();
}

}  // namespace dtrain
