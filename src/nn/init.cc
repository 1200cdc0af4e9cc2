// nn/init.cc — initialization rules (see nn/init.h for the formulas).
#include "nn/init.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "tensor/random.h"

namespace dtrain {

void init_fill(const Init& init, std::span<float> out, uint64_t seed) {
  Rng rng(seed);
  double fan_in = static_cast<double>(std::max<int64_t>(init.fan_in, 1));
  double fan_out = static_cast<double>(std::max<int64_t>(init.fan_out, 1));
  switch (init.kind) {
    case InitKind::kZeros: std::fill(out.begin(), out.end(), 0.0f); return;
    case InitKind::kOnes: std::fill(out.begin(), out.end(), 1.0f); return;
    case InitKind::kUniformFanIn: {
      float b = static_cast<float>(1.0 / std::sqrt(fan_in));
      rng.fill_uniform(out, -b, b);
      return;
    }
    case InitKind::kKaimingUniform: {
      float b = static_cast<float>(std::sqrt(6.0 / fan_in));
      rng.fill_uniform(out, -b, b);
      return;
    }
    case InitKind::kXavierUniform: {
      float b = static_cast<float>(std::sqrt(6.0 / (fan_in + fan_out)));
      rng.fill_uniform(out, -b, b);
      return;
    }
    case InitKind::kNormal: rng.fill_normal(out, 0.0f, init.scale); return;
    case InitKind::kUniform: rng.fill_uniform(out, -init.scale, init.scale); return;
  }
}

const char* init_name(InitKind kind) {
  switch (kind) {
    case InitKind::kZeros: return "zeros";
    case InitKind::kOnes: return "ones";
    case InitKind::kUniformFanIn: return "uniform_fan_in";
    case InitKind::kKaimingUniform: return "kaiming";
    case InitKind::kXavierUniform: return "xavier";
    case InitKind::kNormal: return "normal";
    case InitKind::kUniform: return "uniform";
  }
  return "?";
}

InitKind parse_init(const std::string& name) {
  for (InitKind k : {InitKind::kZeros, InitKind::kOnes, InitKind::kUniformFanIn, InitKind::kKaimingUniform,
                     InitKind::kXavierUniform, InitKind::kNormal, InitKind::kUniform})
    if (name == init_name(k)) return k;
  DT_THROW(InvalidArgument, "unknown init '" << name
                                             << "' (expected zeros, ones, uniform_fan_in, kaiming, xavier, normal or uniform)");
}

}  // namespace dtrain
