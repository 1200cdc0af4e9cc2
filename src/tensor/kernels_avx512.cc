// tensor/kernels_avx512.cc — the kernel table for AVX-512 F/DQ/BW/VL (16 floats per
// register, masked tails). Compiled for that ISA by the pragma below; only called when
// cpu_features() says the CPU has it. All standard headers come before the pragma so no
// shared (inline/template) library code is compiled with AVX-512.
// GCC 12's AVX-512 headers build "undefined" registers by self-initialization, which its
// own -Wuninitialized then reports at every inlined intrinsic (GCC bug 105593, fixed in
// 12.3). Silenced for this file only.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
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
#pragma GCC target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")

#include "tensor/kernels_impl.h"

namespace {

struct Avx512Ops {
  using V = __m512;
  static constexpr int W = 16;
  static __mmask16 tail_mask(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V load_partial(const float* p, int64_t n, float fill) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), tail_mask(n), p);
  }
  static void store_partial(float* p, V v, int64_t n) { _mm512_mask_storeu_ps(p, tail_mask(n), v); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static V min(V a, V b) { return _mm512_min_ps(a, b); }
  static V sqrt(V a) { return _mm512_sqrt_ps(a); }
  static V select_pos(V c, V x) { return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(c, _mm512_setzero_ps(), _CMP_GT_OQ), x); }
  static V round(V a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static V pow2(V n) {
    __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
  }
  // Halve to 256 then 128 bits and finish in SSE (GCC 12's _mm512_reduce_* trip
  // -Wuninitialized inside its own header).
  static __m128 fold(V a, bool use_max) {
    __m256 lo = _mm512_castps512_ps256(a), hi = _mm512_extractf32x8_ps(a, 1);
    __m256 h = use_max ? _mm256_max_ps(lo, hi) : _mm256_add_ps(lo, hi);
    __m128 l4 = _mm256_castps256_ps128(h), h4 = _mm256_extractf128_ps(h, 1);
    return use_max ? _mm_max_ps(l4, h4) : _mm_add_ps(l4, h4);
  }
  static float hsum(V a) {
    __m128 s = fold(a, false);
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float hmax(V a) {
    __m128 s = fold(a, true);
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

// bf16 by the same integer recipe as base/dtype.h, 16 lanes at a time: add 0x7fff plus the
// lowest kept bit (round to nearest even), keep the top 16 bits; NaNs keep their top bits
// with the quiet bit set. The 32 -> 16 bit narrowing is vpmovdw.
struct Bf16Avx512 {
  static void to(const float* x, uint16_t* out, int64_t n) {
    const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    const __m512i round = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x40);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      __m512i b = _mm512_castps_si512(_mm512_loadu_ps(x + i));
      __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(b, abs_mask), inf);
      __m512i hi = _mm512_srli_epi32(b, 16);
      __m512i r = _mm512_srli_epi32(_mm512_add_epi32(b, _mm512_add_epi32(round, _mm512_and_si512(hi, one))), 16);
      r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(hi, quiet));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm512_cvtepi32_epi16(r));
    }
    for (; i < n; ++i) out[i] = dtrain::float_to_bf16(x[i]);
  }
  static void from(const uint16_t* x, float* out, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)));
      _mm512_storeu_ps(out + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
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
Kernels make_avx512_kernels() {
  Kernels k = kernel_table<Impl<Avx512Ops>>(Isa::kAvx512);
  k.to_bf16 = &Bf16Avx512::to;
  k.from_bf16 = &Bf16Avx512::from;
  return k;
}
}  // namespace dtrain
