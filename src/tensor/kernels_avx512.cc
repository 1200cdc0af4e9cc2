// tensor/kernels_avx512.cc — the kernel table for AVX-512 F/DQ/BW/VL (16 floats per
// register, masked tails). Compiled for that ISA by the pragma below; only called when
// cpu_features() says the CPU has it. All standard headers come before the pragma so no
// shared (inline/template) library code is compiled with AVX-512.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "tensor/kernels.h"

#pragma GCC push_options
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
  static float hsum(V a) { return _mm512_reduce_add_ps(a); }
  static float hmax(V a) { return _mm512_reduce_max_ps(a); }
};

}  // namespace

#pragma GCC pop_options

// Built outside the target region: filling the table runs no ISA-specific instruction.
#include "tensor/kernels_table.h"

namespace dtrain {
Kernels make_avx512_kernels() { return kernel_table<Impl<Avx512Ops>>(Isa::kAvx512); }
}  // namespace dtrain
