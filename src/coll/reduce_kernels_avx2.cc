// coll/reduce_kernels_avx2.cc — the float32 and float16 sums in rank order and kAvg's float32
// division with AVX2 (F16C for the halves), for CPUs without AVX-512: the AMD EPYC (Zen 3)
// VMs of the later sittings, and most desktop CPUs. Only called when the CPU has AVX2 (and
// F16C for the halves; reduce_kernels.cc checks). Standard headers come before the target
// pragma so no shared inline code is compiled for AVX2.
//
// Why: before these, such a CPU reduced through the portable loops of reduce_kernels.cc,
// which the compiler vectorises 4 wide (SSE2, the x86-64 baseline) and, for the ordered sum,
// through a stack accumulator block that every source passes through. Measured on the EPYC
// VM (one core, sources in cache or memory as in the collectives): 8 sources of 128 KiB, the
// 8-rank 1 MiB all-reduce's chunk, 86 -> 20 us; 2 sources of 8 MiB, the 2-rank 16 MiB
// all-reduce's half, 1.92 -> 1.04 ms.
//
// Each output vector is srcs[0] + srcs[1] + ... + srcs[k-1], added left to right exactly as
// the portable loop does (adds, never fused), so the bits are the same on every path. Four
// vectors (32 floats) go at once: four independent additions hide the adder's latency, which
// one vector at a time over k sources would expose.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"
#include "coll/reduce_kernels.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#pragma GCC target("avx2,f16c")

namespace dtrain {

void sum_f32_ordered_avx2(float* out, const float* const* srcs, int k, size_t n) {
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const float* s = srcs[0] + i;
    __m256 a0 = _mm256_loadu_ps(s), a1 = _mm256_loadu_ps(s + 8), a2 = _mm256_loadu_ps(s + 16),
           a3 = _mm256_loadu_ps(s + 24);
    for (int j = 1; j < k; ++j) {
      s = srcs[j] + i;
      a0 = _mm256_add_ps(a0, _mm256_loadu_ps(s));
      a1 = _mm256_add_ps(a1, _mm256_loadu_ps(s + 8));
      a2 = _mm256_add_ps(a2, _mm256_loadu_ps(s + 16));
      a3 = _mm256_add_ps(a3, _mm256_loadu_ps(s + 24));
    }
    _mm256_storeu_ps(out + i, a0);
    _mm256_storeu_ps(out + i + 8, a1);
    _mm256_storeu_ps(out + i + 16, a2);
    _mm256_storeu_ps(out + i + 24, a3);
  }
  for (; i + 8 <= n; i += 8) {
    __m256 acc = _mm256_loadu_ps(srcs[0] + i);
    for (int j = 1; j < k; ++j) acc = _mm256_add_ps(acc, _mm256_loadu_ps(srcs[j] + i));
    _mm256_storeu_ps(out + i, acc);
  }
  for (; i < n; ++i) {
    float acc = srcs[0][i];
    for (int j = 1; j < k; ++j) acc += srcs[j][i];
    out[i] = acc;
  }
}

// float16: widened with VCVTPH2PS, added left to right in float32, rounded back once with
// VCVTPS2PH (round to nearest even), a NaN sum stored as kHalfNaN: the bits of the portable
// loop and of the AVX-512 path (reduce_kernels_avx512.cc says why).
void sum_f16_ordered_avx2(uint16_t* out, const uint16_t* const* srcs, int k, size_t n) {
  auto load = [](const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); };
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 acc = load(srcs[0] + i);
    for (int j = 1; j < k; ++j) acc = _mm256_add_ps(acc, load(srcs[j] + i));
    const __m128i h = _mm256_cvtps_ph(acc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
    if (const int nan = _mm256_movemask_ps(_mm256_cmp_ps(acc, acc, _CMP_UNORD_Q))) {
      for (int l = 0; l < 8; ++l)
        if (nan & (1 << l)) out[i + static_cast<size_t>(l)] = kHalfNaN;
    }
  }
  for (; i < n; ++i) {
    float acc = fp16_to_float(srcs[0][i]);
    for (int j = 1; j < k; ++j) acc += fp16_to_float(srcs[j][i]);
    out[i] = acc != acc ? kHalfNaN : float_to_fp16(acc);
  }
}

// kAvg's division of float32 (finish_avg): x / p, or x * (1/p) where p is a power of two (the
// same correctly rounded value).
void divide_f32_avx2(float* x, size_t n, float p, bool power_of_two) {
  const __m256 by = _mm256_set1_ps(power_of_two ? 1.0f / p : p);
  size_t i = 0;
  if (power_of_two)
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), by));
  else
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_div_ps(_mm256_loadu_ps(x + i), by));
  for (; i < n; ++i) x[i] = power_of_two ? x[i] * (1.0f / p) : x[i] / p;
}

}  // namespace dtrain

#pragma GCC diagnostic pop
