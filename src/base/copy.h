// base/copy.h — memcpy for the bulk copies of the collectives, transports and strategies,
// without the one case where memcpy runs twenty times slower than memory.
//
// Contract
// - copy_memory(dst, src, n): copies n bytes from src to dst, ranges that do not overlap (as
//   memcpy); n == 0 is allowed with null pointers (memcpy's is undefined behaviour).
// - The result is memcpy's, bit for bit; only the speed differs, and only where glibc would
//   take `rep movsb` for a destination that lies later in its cache line than the source.
//
// Why: from about 2 KiB up, glibc's memcpy copies with `rep movsb` on CPUs that advertise
// fast strings (ERMS/FSRM). On AMD Zen 3 (EPYC family 25, model 1, measured here) that
// instruction collapses to 1.6-2 GB/s, against 25-55 GB/s otherwise, whenever
// 0 < (dst mod 64) - (src mod 64) < 32 (at any size up to the L3), and for any positive
// difference just above the 2 KiB threshold. The collectives meet that all the time: a
// user's buffer from malloc is 16 bytes past a line, the shared-memory slots are on lines, so
// the copies of one all-reduce land in or out of the window depending on the chunk offsets.
// A 64 KiB all-reduce on 4 ranks took 90-190 us where 68 KiB took 40 (docs/PERFORMANCE.md).
// copy_memory takes a vector loop (AVX2 where the CPU has it, else SSE2) for those
// alignments: unaligned loads, stores aligned to the vector, 128 bytes an iteration; the
// loop matches or beats `rep movsb` at every size measured, and memcpy keeps the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace dtrain {

namespace copy_detail {
// From this size up glibc may use `rep movsb` (its threshold is 2 KiB-4 KiB on x86-64).
inline constexpr size_t kLoopFromBytes = 2048;
void copy_loop(void* dst, const void* src, size_t n);  // n >= 64, disjoint ranges
}  // namespace copy_detail

// Whether copy_memory takes its own loop for these addresses and size (for tests and benches).
inline bool copy_takes_loop(const void* dst, const void* src, size_t n) {
#if defined(__x86_64__)
  return n >= copy_detail::kLoopFromBytes &&
         (reinterpret_cast<uintptr_t>(dst) & 63) > (reinterpret_cast<uintptr_t>(src) & 63);
#else
  (void)dst, (void)src, (void)n;
  return false;
#endif
}

inline void copy_memory(void* dst, const void* src, size_t n) {
  if (n == 0) return;
  if (copy_takes_loop(dst, src, n))
    copy_detail::copy_loop(dst, src, n);
  else
    std::memcpy(dst, src, n);
}

// n elements of a trivially copyable type, through copy_memory.
template <class T>
void copy_elements(T* dst, const T* src, size_t n) {
  static_assert(std::is_trivially_copyable_v<T>);
  copy_memory(dst, src, n * sizeof(T));
}

}  // namespace dtrain
