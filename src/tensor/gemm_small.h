// tensor/gemm_small.h — matrix products with one short side (a small batch), on AVX-512.
//
// Why: OpenBLAS packs both operands of every product into its own layout. With a batch of 64
// rows, packing the 1024x1024 weight matrix costs as much per call as at 128 rows for half
// the arithmetic: its forward and weight-gradient products ran at 106-118 GFLOP/s at 64 rows
// against 127-142 at 128 on this machine's Xeon (peak 214). These kernels read the large
// operand where it lies, once, and pack only the small one. Measured on the MLP's shapes
// (784-1024-1024-1024, batch 64, one core): forward 0.93 -> 0.79 ms and 1.25 -> 1.02 ms,
// weight gradient of the 1024x1024 layers 1.15 -> 1.02 ms. At 128 rows and for the input
// gradient (whose large operand is read once per row tile) OpenBLAS was as fast or faster,
// so those stay with it.
//
// Contract
// - gemm_small(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc) computes what
//   gemm(..., alpha = 1, ...) does (tensor/blas.h) and returns true, or returns false having
//   touched nothing when the shape is not one it takes (then OpenBLAS runs it):
//     forward          C[m,n] = A[m,k] B[n,k]^T   (trans_b only), m <= 64, n >= 256, k >= 256
//     weight gradient  C[m,n] = A[k,m]^T B[k,n]   (trans_a only), k <= 64, m >= 256, n >= 256
//   beta is 0 (C is overwritten, NaN-safe) or 1 (accumulated); anything else is declined.
// - Only called where the CPU runs AVX-512 (best_isa(), so DTRAIN_ISA=avx2 turns it off).
// - Sums run over k in order, one fused multiply-add per term, in single precision: results
//   differ from OpenBLAS's in the last bits (its blocking orders the sums differently), and
//   are the same on every call and every rank for the same inputs.
// - gemm_small_scratch_bytes(trans_a, trans_b, m, n, k): the bytes of packing scratch a call
//   of that shape needs, which its thread keeps (grown, never shrunk): the forward's packed
//   A^T (the size of A at 16-row granularity; its C^T goes through 24 KiB on the stack), the
//   weight gradient's packed A and B (each the size of its operand, whole tiles and panels);
//   0 for shapes it declines. The planner counts it in a rank's memory.
// Thread-safety: reentrant; each thread packs into its own scratch.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dtrain {

bool gemm_small(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
size_t gemm_small_scratch_bytes(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k);

}  // namespace dtrain
