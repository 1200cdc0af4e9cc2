// tensor/gemm_small.h — matrix products with one short side (a small batch), on AVX-512 or
// AVX2.
//
// Why: OpenBLAS packs both operands of every product into its own layout. With a batch of 64
// rows, packing the 1024x1024 weight matrix costs as much per call as at 128 rows for half
// the arithmetic: its forward and weight-gradient products ran at 106-118 GFLOP/s at 64 rows
// against 127-142 at 128 on this machine's Xeon (peak 214). These kernels read the large
// operand where it lies, once, and pack only the small one. Measured on the MLP's shapes
// (784-1024-1024-1024, batch 64, one core): forward 0.93 -> 0.79 ms and 1.25 -> 1.02 ms,
// weight gradient of the 1024x1024 layers 1.15 -> 1.02 ms. At 128 rows and for the input
// gradient (whose large operand is read once per row tile) OpenBLAS was as fast or faster,
// so those stay with it (a later Xeon measured the forward 1.17x at 128 rows). The same algorithm runs on AVX2 (gemm_small_impl.h has it once),
// where it beats OpenBLAS's Haswell kernels at 64-256 rows (docs/COMPUTE.md has the table).
//
// Contract
// - gemm_small(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc) computes what
//   gemm(..., alpha = 1, ...) does (tensor/blas.h) and returns true, or returns false having
//   touched nothing when the shape is not one it takes (then OpenBLAS runs it):
//     forward          C[m,n] = A[m,k] B[n,k]^T   (trans_b only), m <= R, n >= L, k >= L
//     weight gradient  C[m,n] = A[k,m]^T B[k,n]   (trans_a only), k <= R, m >= L, n >= L
//     input gradient   C[m,n] = A[m,k] B[k,n]     (neither), only where OpenBLAS runs
//                      narrower kernels (below), n >= L, k >= L
//   where R, measured per instruction set against OpenBLAS's kernels of the same width, is
//   128 (forward) and 64 (weight gradient) on AVX-512 and 256 for both on AVX2; and has no
//   limit where OpenBLAS runs narrower kernels than the set (blas_vector_bits(), tensor/
//   blas.h: Haswell's on an AVX-512 CPU, as OPENBLAS_CORETYPE=Haswell makes it, or its SSE
//   families on an AVX2 one). On the 2-vCPU EPYC (Zen 4) VM with OpenBLAS on Haswell's
//   kernels (2026-12-01, BM_Sgemm, one core, 1024x1024 weights) the AVX-512 products ran
//   1.4-1.9x faster than OpenBLAS at every size from 64 to 1024 rows (forward 256 rows 3.3 ms
//   against 5.6-6.4, 1024 rows 14.4 against 23.2; weight gradient 1024 rows 14.8 against
//   22.5), and BM_MlpFwdBwd at batch 128 went 26.6 -> 15.4 ms. Past 64 the small side goes in
//   blocks of 64. The input gradient (B read in place, a panel of columns at a time) ran at
//   0.7-0.9x OpenBLAS's kernels of the same width and is left to them; against Haswell's on
//   AVX-512 it ran 1.6-1.7x (128 rows 1.9 against 3.1 ms, 1024 rows 14.1 against 23.9).
//   L, the large sides' least extent, is 256, and 32 where OpenBLAS runs narrower kernels:
//   there narrow layers ran at half the rate of wide ones (on the EPYC VM, 128 rows, one core,
//   2026-12-02: the 784x128 layer's forward 261 us, 98 GFLOP/s, against 784x256's 277), and
//   these products took them to 1.4-1.6x (784x128 161 us and backward 258 -> 167; 784x64 135
//   -> 97; 128x256 86 -> 57); below 32, OpenBLAS as before.
//   beta is 0 (C is overwritten, NaN-safe) or 1 (accumulated); anything else is declined.
// - gemm_small_every_size(): whether the limits R are lifted in this process (below the
//   declarations).
// - Runs the widest set best_isa() allows (DTRAIN_ISA=avx2 picks the AVX2 kernels on an
//   AVX-512 CPU); declines everything where that is generic (no AVX2, or DTRAIN_ISA=generic).
// - Sums run over k in order, one fused multiply-add per term, in single precision: results
//   differ from OpenBLAS's in the last bits (its blocking orders the sums differently), and
//   are the same on every call and every rank for the same inputs.
// - gemm_small_scratch_bytes(trans_a, trans_b, m, n, k): the bytes of packing scratch a call
//   of that shape needs, which its thread keeps (grown, never shrunk): the forward's packed
//   A^T (the size of A's first 64 rows at the vector's granularity; its C^T goes through 24
//   KiB on the stack), the weight gradient's packed A and B (each the size of 64 rows of its
//   operand, whole tiles and panels); 0 for shapes it declines. The planner counts it in a rank's memory.
// Thread-safety: reentrant; each thread packs into its own scratch.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dtrain {

bool gemm_small(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
size_t gemm_small_scratch_bytes(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k);
// Whether this process's gemm_small takes every size of the small side (and the input
// gradient): OpenBLAS runs narrower kernels than the set best_isa() picks. False where it
// runs none (generic). `dtrain version` says which.
bool gemm_small_every_size();

}  // namespace dtrain
