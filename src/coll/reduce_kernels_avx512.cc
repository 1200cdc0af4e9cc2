// coll/reduce_kernels_avx512.cc — the float32 and float16 sums in rank order with AVX-512,
// for the large all-reduces of training (gradients are float32 sums; float16 ones compressed),
// and kAvg's float32 division. Only called when the CPU has
// AVX-512F (reduce_kernels.cc checks). Standard headers come before the target pragma so no
// shared inline code is compiled for AVX-512.
//
// Each output vector is srcs[0] + srcs[1] + ... + srcs[k-1], added left to right exactly as
// the portable loop does, so the bits are the same on every path. (Non-temporal stores for
// large outputs were tried: they helped a pull-style shm all-reduce at 64 MiB, but once the
// reducer pushes each piece to its peers straight from cache they only cost.)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "base/dtype.h"
#include "coll/reduce_kernels.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#pragma GCC target("avx512f")

namespace dtrain {

void sum_f32_ordered_avx512(float* out, const float* const* srcs, int k, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 acc = _mm512_loadu_ps(srcs[0] + i);
    for (int j = 1; j < k; ++j) acc = _mm512_add_ps(acc, _mm512_loadu_ps(srcs[j] + i));
    _mm512_storeu_ps(out + i, acc);
  }
  for (; i < n; ++i) {
    float acc = srcs[0][i];
    for (int j = 1; j < k; ++j) acc += srcs[j][i];
    out[i] = acc;
  }
}

// float16: widened to float32 with VCVTPH2PS, added left to right, rounded back once with
// VCVTPS2PH (round to nearest even): the bits of the portable loop (fp16_to_float, float adds,
// float_to_fp16), which converted one element at a time through an out-of-line function and
// reduced at ~0.6 GB/s. A NaN sum becomes kHalfNaN, as on the portable path, rather than the
// hardware's sign- and payload-keeping one (reduce_kernels_test checks the bits over every
// half and across rounding, subnormal, overflow and NaN cases).
void sum_f16_ordered_avx512(uint16_t* out, const uint16_t* const* srcs, int k, size_t n) {
  auto load = [](const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); };
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 acc = load(srcs[0] + i);
    for (int j = 1; j < k; ++j) acc = _mm512_add_ps(acc, load(srcs[j] + i));
    const __m256i h = _mm512_cvtps_ph(acc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), h);
    if (const __mmask16 nan = _mm512_cmp_ps_mask(acc, acc, _CMP_UNORD_Q)) {
      for (int l = 0; l < 16; ++l)
        if (nan & (1u << l)) out[i + static_cast<size_t>(l)] = kHalfNaN;
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
void divide_f32_avx512(float* x, size_t n, float p, bool power_of_two) {
  const __m512 by = _mm512_set1_ps(power_of_two ? 1.0f / p : p);
  size_t i = 0;
  if (power_of_two)
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), by));
  else
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_div_ps(_mm512_loadu_ps(x + i), by));
  for (; i < n; ++i) x[i] = power_of_two ? x[i] * (1.0f / p) : x[i] / p;
}

}  // namespace dtrain

#pragma GCC diagnostic pop
