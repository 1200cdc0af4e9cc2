// cli/blas_core.h — a program's first step: OpenBLAS on the kernels this CPU runs.
//
// Contract
// - run_again_with_better_blas_core(argv): where OpenBLAS chose a pre-AVX kernel family on
//   a CPU with AVX2 or AVX-512 (tensor/blas.h better_blas_core) and OPENBLAS_CORETYPE is
//   unset, says so on stderr, sets it and runs this program again as itself (execv of
//   /proc/self/exe with argv). Returns only where there is nothing to correct, the user set
//   OPENBLAS_CORETYPE (any value), or the exec failed (said on stderr). Call it first in
//   main(), before any thread starts: the CLI (cli/commands.cc) and the compute benchmarks.
// Reads the environment, so it lives with the entry points (scripts/check_layers.py).
#pragma once

namespace dtrain {

void run_again_with_better_blas_core(char** argv);

}  // namespace dtrain
