// tensor/cpu_features.cc — one-time CPU probe.
#include "tensor/cpu_features.h"

#include <string>

#include "base/settings.h"

namespace dtrain {

namespace {
struct Probe {
  CpuFeatures features;
  Isa best;
};

// Runs once. The DTRAIN_ISA cap lets tests and benchmarks force a narrower kernel set.
Probe probe() {
  Probe p;
  __builtin_cpu_init();
  p.features.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  p.features.avx512 = p.features.avx2_fma && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl");
  p.best = p.features.avx512 ? Isa::kAvx512 : p.features.avx2_fma ? Isa::kAvx2 : Isa::kGeneric;
  const Settings& settings = Settings::process();
  if (settings.has("DTRAIN_ISA")) {
    const std::string cap = settings.choice("DTRAIN_ISA");
    Isa want = p.best;
    if (cap == "generic") want = Isa::kGeneric;
    if (cap == "avx2") want = Isa::kAvx2;
    if (cap == "avx512") want = Isa::kAvx512;
    if (static_cast<int>(want) < static_cast<int>(p.best)) p.best = want;
  }
  return p;
}

const Probe& the_probe() {
  static const Probe p = probe();
  return p;
}
}  // namespace

const CpuFeatures& cpu_features() { return the_probe().features; }
Isa best_isa() { return the_probe().best; }

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::kGeneric: return true;
    case Isa::kAvx2: return cpu_features().avx2_fma;
    case Isa::kAvx512: return cpu_features().avx512;
  }
  return false;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kGeneric: return "generic";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "?";
}

}  // namespace dtrain
