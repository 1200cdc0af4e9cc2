// tensor/gemm_small_avx2.cc — tensor/gemm_small_impl.h for AVX2 + FMA3: 8 floats per
// register, tiles of 6 rows by up to 2 registers (12 accumulators, 2 loads of B and one
// broadcast: 15 of the 16 registers, the shape of OpenBLAS's own Haswell kernel). Compiled
// for AVX2 by the pragma below (tensor/kernels_avx2.cc explains the pattern); called only
// where the CPU has it.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "tensor/gemm_small_isa.h"

#pragma GCC push_options
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#pragma GCC target("avx2,fma")

#include "tensor/gemm_small_impl.h"

namespace dtrain {
namespace {

struct Avx2 {
  using V = __m256;
  static constexpr int W = 8;
  static constexpr int kMaxNv = 2;
  // Against OpenBLAS's Haswell kernels on the same Xeon run as AVX2 (DTRAIN_ISA=avx2,
  // OPENBLAS_CORETYPE=Haswell; 2026-11-29, best of 7 runs of BM_Sgemm, 1024x1024 weights):
  // forward 64 rows 1.39x, 128 rows 1.25x, 256 rows 1.16x; weight gradient 64 rows 1.01x,
  // 128 rows 1.24x, 256 rows 1.18x. (1024-row products, where OpenBLAS's blocking pays, stay
  // with it.) The input gradient C = A B, tried the same way with B packed in panels, ran at
  // 0.7-0.9x OpenBLAS on both sets and is left to it where OpenBLAS is as wide.
  static constexpr int64_t kForwardRows = 256;
  static constexpr int64_t kGradientRows = 256;
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
};

}  // namespace

bool gemm_small_avx2(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                     const float* b, int64_t ldb, float beta, float* c, int64_t ldc, bool any_rows) {
  return SmallGemm<Avx2>::run(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc, any_rows);
}
size_t gemm_small_scratch_bytes_avx2(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, bool any_rows) {
  return SmallGemm<Avx2>::scratch_bytes(trans_a, trans_b, m, n, k, any_rows);
}

}  // namespace dtrain

#pragma GCC diagnostic pop
#pragma GCC pop_options
