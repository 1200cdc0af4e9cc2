// cli/blas_core.cc — see blas_core.h.
#include "cli/blas_core.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tensor/blas.h"
#include "tensor/cpu_features.h"

namespace dtrain {

// OpenBLAS chose its kernels from the CPU's model number as it loaded; where a VM hides the
// model it may have fallen back to pre-AVX ones (tensor/blas.h better_blas_core), which run
// every BLAS product several times slower. It reads OPENBLAS_CORETYPE only then, so the one
// way to correct it is to set that and run this program again, as itself. Skipped where the
// user set OPENBLAS_CORETYPE (any value, so also the way to keep OpenBLAS's own choice), and
// never twice: the second run finds it set. Ranks started by `dtrain run` inherit it.
void run_again_with_better_blas_core(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE")) return;
  const CpuFeatures& f = cpu_features();
  const char* chosen = blas_core();
  const char* better = better_blas_core(chosen, f.avx512, f.avx2_fma);
  if (!better) return;
  std::fprintf(stderr,
               "dtrain: OpenBLAS chose its %s kernels for this CPU, which runs %s (a VM hiding the CPU model?): "
               "running again with OPENBLAS_CORETYPE=%s (set OPENBLAS_CORETYPE to choose yourself)\n",
               chosen, f.avx512 ? "AVX-512" : "AVX2", better);
  ::setenv("OPENBLAS_CORETYPE", better, 1);
  ::execv("/proc/self/exe", argv);
  std::fprintf(stderr, "dtrain: could not run again (%s); going on with OpenBLAS's %s kernels\n", std::strerror(errno), chosen);
}

}  // namespace dtrain
