// base/copy.cc — the AVX2 loop behind copy_memory (base/copy.h).
//
// The loop: copy the first vector unaligned, then move on to the next vector boundary of the
// destination (re-copying a few bytes of the first vector, which is harmless: the ranges do
// not overlap), copy four vectors an iteration with unaligned loads and aligned stores, then
// single vectors, and finish with the last vector unaligned, ending exactly at dst + n (again
// re-copying bytes already written). No byte outside [dst, dst + n) is touched.
#include "base/copy.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace dtrain::copy_detail {
#if defined(__x86_64__)
namespace {

__attribute__((target("avx2"))) void copy_avx2(char* d, const char* s, size_t n) {
  const char* const s_end = s + n;
  char* const d_end = d + n;
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s)));
  const size_t skip = 32 - (reinterpret_cast<uintptr_t>(d) & 31);
  d += skip;
  s += skip;
  n -= skip;
  for (; n >= 128; n -= 128, d += 128, s += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 64));
    const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 96));
    _mm256_store_si256(reinterpret_cast<__m256i*>(d), a);
    _mm256_store_si256(reinterpret_cast<__m256i*>(d + 32), b);
    _mm256_store_si256(reinterpret_cast<__m256i*>(d + 64), c);
    _mm256_store_si256(reinterpret_cast<__m256i*>(d + 96), e);
  }
  for (; n >= 32; n -= 32, d += 32, s += 32)
    _mm256_store_si256(reinterpret_cast<__m256i*>(d), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(d_end - 32),
                      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s_end - 32)));
}

}  // namespace

// Without AVX2, memcpy: the crawl was measured on Zen 3, whose every part has AVX2.
void copy_loop(void* dst, const void* src, size_t n) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2)
    copy_avx2(static_cast<char*>(dst), static_cast<const char*>(src), n);
  else
    std::memcpy(dst, src, n);
}
#else
void copy_loop(void* dst, const void* src, size_t n) { std::memcpy(dst, src, n); }
#endif
}  // namespace dtrain::copy_detail
