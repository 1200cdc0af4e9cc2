// tensor/cpu_features.h — which SIMD instruction sets this CPU runs, probed once.
//
// Contract: cpu_features() probes with __builtin_cpu_supports on first call and returns the
// same immutable value forever after (a function-local static const: process-wide but never
// mutated). best_isa() is the widest kernel set this CPU runs; DTRAIN_ISA=generic|avx2|avx512
// in the environment caps it (read once, at the probe), which is how tests and benchmarks
// compare variants on one machine.
// Thread-safety: safe from any thread (C++ guarantees one initialization).
#pragma once

namespace dtrain {

enum class Isa { kGeneric = 0, kAvx2 = 1, kAvx512 = 2 };

struct CpuFeatures {
  bool avx2_fma = false;  // AVX2 + FMA3
  bool avx512 = false;    // AVX-512 F, DQ, BW, VL
};

const CpuFeatures& cpu_features();
// Widest supported ISA, capped by DTRAIN_ISA.
Isa best_isa();
// True when this CPU can run kernels built for `isa`.
bool isa_supported(Isa isa);
const char* isa_name(Isa isa);

}  // namespace dtrain
