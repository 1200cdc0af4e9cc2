// tensor/blas.h — matrix products through OpenBLAS (blas.cc is the only file with cblas).
//
// Contract
// - gemm computes C = alpha * op(A) * op(B) + beta * C for row-major matrices, where
//   op(X) = X or X^T. op(A) is [m, k], op(B) is [k, n], C is [m, n]; lda/ldb/ldc are row
//   strides in elements. Transposes are free (no copy is made). beta == 0 ignores C's old
//   contents (NaN-safe). m, n or k == 0 is allowed (k == 0 scales C by beta).
// - OpenBLAS keeps its own process-wide thread pool. dtrain never changes its size behind
//   your back: set_blas_threads(n) calls openblas_set_num_threads(n) and is the only place
//   that does. Call it once at program start (the CLI does, from --blas-threads). With
//   several training threads calling gemm at once (thread replicas, HOGWILD!) use 1, or
//   the threads oversubscribe the cores. blas_threads() reports the current setting.
// Thread-safety: gemm may be called from several threads at once. set_blas_threads must not
// race with running gemms.
#pragma once

#include <cstdint>

namespace dtrain {

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
          int64_t ldc);

void set_blas_threads(int threads);
int blas_threads();
// OpenBLAS's configuration string (core type, thread build), for benchmark headers.
const char* blas_config();
// The kernel family OpenBLAS chose for this CPU at load ("SkylakeX", "Haswell", "Prescott").
const char* blas_core();
// The vector width, in bits, of the kernel family OpenBLAS runs: 512 for its AVX-512 families
// (SkylakeX, Cooperlake, SapphireRapids), 256 for its AVX and AVX2 ones (Sandybridge,
// Haswell, Zen, the Bulldozer line), 128 for the rest (its SSE families and any name it
// does not list). gemm_small (tensor/gemm_small.h) takes every size where this is narrower
// than its own set.
int blas_vector_bits();
// OpenBLAS picks its kernels from the CPU's model number, and a VM may hide it: on a 16-core
// Xeon VM with AVX-512 (2026-11-26) Debian's OpenBLAS 0.3.21 ran its "Prescott" (SSE3)
// kernels, and a 128x256x784 product took 9x what gemm_small's 64-row one did. Given the
// family it chose and what the CPU runs, the family it should run instead ("SkylakeX" with
// AVX-512 F/DQ/BW/VL, "Haswell" with AVX2 and FMA), or nullptr when its choice stands (an
// AVX-era family, or a CPU without AVX2). OpenBLAS reads OPENBLAS_CORETYPE once, as it
// loads: the CLI sets it and runs itself again (cli/blas_core.h).
const char* better_blas_core(const char* chosen, bool avx512, bool avx2_fma);

}  // namespace dtrain
