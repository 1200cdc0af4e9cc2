// tensor/gemm_small_avx512.cc — tensor/gemm_small_impl.h for AVX-512: 16 floats per register,
// tiles of 6 rows by up to 4 registers (24 accumulators of 32 registers). Run from L1 the
// tile reached 185 of the 16-core Xeon's 214 GFLOP/s per core. Compiled for AVX-512 by the
// pragma below (tensor/kernels_avx512.cc explains the pattern); called only where the CPU
// has it.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "tensor/gemm_small_isa.h"

#pragma GCC push_options
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#pragma GCC target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")

#include "tensor/gemm_small_impl.h"

namespace dtrain {
namespace {

struct Avx512 {
  using V = __m512;
  static constexpr int W = 16;
  static constexpr int kMaxNv = 4;
  // Against OpenBLAS's SkylakeX kernels on a Xeon with AVX-512 (2026-11-29, one core, best of
  // 7 runs of compute_bench's BM_Sgemm, 1024x1024 weights): forward 64 rows 1.28x, 128 rows
  // 1.17x, 256 rows 0.98x; weight gradient 64 rows 1.31x, 128 rows 0.98x, 256 rows 0.93x.
  static constexpr int64_t kForwardRows = 128;
  static constexpr int64_t kGradientRows = 64;
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
};

}  // namespace

bool gemm_small_avx512(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                       const float* b, int64_t ldb, float beta, float* c, int64_t ldc, bool any_rows) {
  return SmallGemm<Avx512>::run(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc, any_rows);
}
size_t gemm_small_scratch_bytes_avx512(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, bool any_rows) {
  return SmallGemm<Avx512>::scratch_bytes(trans_a, trans_b, m, n, k, any_rows);
}

}  // namespace dtrain

#pragma GCC diagnostic pop
#pragma GCC pop_options
