// base/aligned.h — std::vector storage aligned to a cache line (64 bytes, the AVX-512 width).
//
// A plain std::vector<float> of a few MB comes from glibc's mmap path 16 bytes past a page
// boundary, so every 64-byte store of a kernel writing it (a GEMM's output, an optimizer
// step, a reduction) straddles two cache lines. Flat buffers that kernels write in bulk
// (gradients, optimizer state) use AlignedVector instead; small per-thread scratch that
// other threads must not share a line with uses own_lines. Allocation goes through the
// aligned operator new, so base/heap_stats.h counts it like everything else.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace dtrain {

inline constexpr size_t kCacheLine = 64;

template <class T>
struct CacheAligned {
  using value_type = T;
  CacheAligned() = default;
  template <class U>
  CacheAligned(const CacheAligned<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kCacheLine})); }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t{kCacheLine}); }
  template <class U>
  bool operator==(const CacheAligned<U>&) const { return true; }
};

template <class T>
using AlignedVector = std::vector<T, CacheAligned<T>>;

// n elements on cache lines of their own: aligned, and the size rounded up to whole lines, so
// no other allocation (another thread's, say) can share a line with them. For per-thread
// scratch that is written all the time: two threads' 80-byte score buffers that glibc put on
// one line cost HOGWILD! on news20 a third of its throughput at 2 threads (see
// parallel/hogwild_hot.cc).
template <class T>
AlignedVector<T> own_lines(size_t n) {
  constexpr size_t per_line = kCacheLine / sizeof(T) > 0 ? kCacheLine / sizeof(T) : 1;
  return AlignedVector<T>((n + per_line - 1) / per_line * per_line);
}

}  // namespace dtrain
