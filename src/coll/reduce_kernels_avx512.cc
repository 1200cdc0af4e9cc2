// coll/reduce_kernels_avx512.cc — the float32 sum in rank order with AVX-512, for the large
// all-reduces of training (gradients are float32 sums). Only called when the CPU has
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

}  // namespace dtrain

#pragma GCC diagnostic pop
