// coll/bytes.h — memcpy/memmove that accept a zero length with null pointers (and avoid
// memcpy's slow alignments, base/copy.h), and a copy that bypasses the caches.
//
// Collectives meet empty blocks all the time (count 0, counts smaller than the group), and a
// zero-length std::memcpy with a null pointer is undefined behaviour (UBSan reports it).
// copy_bytes_streaming(dst, src, n): the same as copy_bytes for non-overlapping ranges, with
// non-temporal stores on x86-64 (no read-for-ownership of dst, and dst does not displace the
// cache); for copies far larger than the caches, which nobody reads back soon. glibc's memcpy
// switches to such stores itself only above 3/4 of the last-level cache it is told of, which
// on a VM that reports the host's (480 MiB here) is never.
#pragma once

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>

#include "base/copy.h"
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace dtrain {

// memcpy through base/copy.h (which avoids memcpy's slow `rep movsb` alignments).
inline void copy_bytes(void* dst, const void* src, size_t n) { copy_memory(dst, src, n); }
// For out-of-place calls that may be in place: nothing to do when dst is src; ranges that
// overlap otherwise are memmove's.
inline void copy_bytes_if_apart(void* dst, const void* src, size_t n) {
  if (n == 0 || dst == src) return;
  const char* d = static_cast<const char*>(dst);
  const char* s = static_cast<const char*>(src);
  if (d + n <= s || s + n <= d)
    copy_memory(dst, src, n);
  else
    std::memmove(dst, src, n);
}

inline void copy_bytes_streaming(void* dst, const void* src, size_t n) {
#if defined(__x86_64__)
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  const size_t head = std::min(n, (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16);
  copy_bytes(d, s, head);
  size_t i = head;
  for (; i + 64 <= n; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  copy_bytes(d + i, s + i, n - i);
  _mm_sfence();  // the stores are weakly ordered: visible before whatever announces the copy
#else
  copy_bytes(dst, src, n);
#endif
}

}  // namespace dtrain
