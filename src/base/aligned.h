// base/aligned.h — std::vector storage aligned to a cache line (64 bytes, the AVX-512 width).
//
// A plain std::vector<float> of a few MB comes from glibc's mmap path 16 bytes past a page
// boundary, so every 64-byte store of a kernel writing it (a GEMM's output, an optimizer
// step, a reduction) straddles two cache lines. Flat buffers that kernels write in bulk
// (gradients, optimizer state) use AlignedVector instead. Allocation goes through the
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

}  // namespace dtrain
