// base/copy.h — memcpy for the bulk copies of the collectives, transports and strategies,
// without the one case where memcpy runs twenty times slower than memory.
//
// Contract
// - copy_memory(dst, src, n): copies n bytes from src to dst, ranges that do not overlap (as
//   memcpy); n == 0 is allowed with null pointers (memcpy's is undefined behaviour).
// - The result is memcpy's, bit for bit; only the speed differs, and only where glibc would
//   take `rep movsb` for a destination just past the source modulo 4 KiB.
//
// Why: from about 2 KiB up, glibc's memcpy copies with `rep movsb` on CPUs that advertise
// fast strings (ERMS/FSRM). On AMD Zen 3 (EPYC family 25, model 1, measured here) that
// instruction collapses to 1.6-2 GB/s, against 25-60 GB/s otherwise, whenever the destination
// lies 1-31 bytes past the source modulo 4 KiB, at every size measured from 4 KiB to 256 KiB
// (from 1 MiB up glibc no longer takes `rep movsb` here). That is the page-offset distance at
// which the copy's loads look like they depend on its own stores just before (4K aliasing).
// The collectives meet it often: the shared-memory slots sit on page boundaries and a
// large user buffer from malloc 16 bytes past one, so a copy from the buffer into a slot is
// 16 bytes off modulo 4 KiB. A 64 KiB all-reduce on 4 ranks took 90-190 us where 68 KiB took
// 40 (docs/history/sittings.md). The kernel's own copies (process_vm_readv) crawl the same way,
// which copy_memory cannot help (coll/shm_direct.cc places its destinations to avoid it).
// copy_memory takes an AVX2 loop (memcpy on a CPU without AVX2) for distances of
// 1-63 bytes modulo 4 KiB (glibc checks the same window on Intel CPUs with fast short
// strings, without the modulo): unaligned loads, stores aligned to the vector, 128 bytes an
// iteration; it matches memcpy's speed elsewhere (`transport_bench --benchmark_filter=BM_Copy`).
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
  const uintptr_t distance = (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & 4095;
  return n >= copy_detail::kLoopFromBytes && distance >= 1 && distance <= 63;
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
