// tensor/kernels_avx2.cc — the kernel table for AVX2 + FMA3 (8 floats per register).
// Compiled for that ISA by the pragma below, not by a global -march flag; only called when
// cpu_features() says the CPU has it. All standard headers come before the pragma so no
// shared (inline/template) library code is compiled with AVX2.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "base/dtype.h"
#include "tensor/kernels.h"

#pragma GCC push_options
// Vector arguments/returns only cross functions of this file (internal linkage), so the
// "ABI changes without AVX" note does not apply.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#pragma GCC target("avx2,fma")

#include "tensor/kernels_impl.h"

namespace {

struct Avx2Ops {
  using V = __m256;
  static constexpr int W = 8;
  static __m256i tail_mask(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V load_partial(const float* p, int64_t n, float fill) {
    __m256i m = tail_mask(n);
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
  }
  static void store_partial(float* p, V v, int64_t n) { _mm256_maskstore_ps(p, tail_mask(n), v); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V min(V a, V b) { return _mm256_min_ps(a, b); }
  static V sqrt(V a) { return _mm256_sqrt_ps(a); }
  static V select_pos(V c, V x) { return _mm256_and_ps(_mm256_cmp_ps(c, _mm256_setzero_ps(), _CMP_GT_OQ), x); }
  static V round(V a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static V pow2(V n) {
    __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  }
  static float hsum(V a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float hmax(V a) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

// bf16 by the same integer recipe as base/dtype.h, 8 lanes at a time (see the AVX-512
// file). Narrowing: packus works per 128-bit half, so a 64-bit permute restores the order.
struct Bf16Avx2 {
  static __m256i round8(const float* x) {
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i round = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1), quiet = _mm256_set1_epi32(0x40);
    __m256i b = _mm256_castps_si256(_mm256_loadu_ps(x));
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(b, abs_mask), inf);
    __m256i hi = _mm256_srli_epi32(b, 16);
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(b, _mm256_add_epi32(round, _mm256_and_si256(hi, one))), 16);
    return _mm256_blendv_epi8(r, _mm256_or_si256(hi, quiet), nan);
  }
  static void to(const float* x, uint16_t* out, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      __m256i packed = _mm256_packus_epi32(round8(x + i), round8(x + i + 8));
      packed = _mm256_permute4x64_epi64(packed, 0xD8);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), packed);
    }
    for (; i < n; ++i) out[i] = dtrain::float_to_bf16(x[i]);
  }
  static void from(const uint16_t* x, float* out, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
      _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    for (; i < n; ++i) out[i] = dtrain::bf16_to_float(x[i]);
  }
};

}  // namespace

#pragma GCC diagnostic pop
#pragma GCC pop_options

// Built outside the target region: filling the table runs no ISA-specific instruction.
#include "tensor/kernels_table.h"

namespace dtrain {
Kernels make_avx2_kernels() {
  Kernels k = kernel_table<Impl<Avx2Ops>>(Isa::kAvx2);
  k.to_bf16 = &Bf16Avx2::to;
  k.from_bf16 = &Bf16Avx2::from;
  return k;
}
}  // namespace dtrain
