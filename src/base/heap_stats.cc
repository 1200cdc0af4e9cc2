#include "base/heap_stats.h"

#include <malloc.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

#include "base/huge_pages.h"
#include "base/large_blocks.h"

namespace dtrain {
namespace {

std::atomic<int64_t> g_live{0}, g_peak{0};

void count_bytes(int64_t n) {
  const int64_t now = g_live.fetch_add(n, std::memory_order_relaxed) + n;
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

// Blocks of 2 MiB or more come from base/large_blocks.h where it takes them (on 2 MiB
// boundaries, in huge pages, kept for reuse), the rest from malloc.
void* alloc(std::size_t n, std::size_t align, bool nothrow) {
  if (n == 0) n = 1;
  if (n >= kHugePageBytes) {
    if (void* big = large_block_allocate(n, align)) {
      count_bytes(static_cast<int64_t>(large_block_length(n)));
      return big;
    }
  }
  void* p = nullptr;
  if (align <= alignof(std::max_align_t)) {
    p = std::malloc(n);
  } else {
    p = std::aligned_alloc(align, (n + align - 1) / align * align);
  }
  if (!p) {
    if (nothrow) return nullptr;
    throw std::bad_alloc();
  }
  count_bytes(static_cast<int64_t>(::malloc_usable_size(p)));
  return p;
}

void release(void* p) {
  if (!p) return;
  if (const size_t big = large_block_release(p)) {
    g_live.fetch_sub(static_cast<int64_t>(big), std::memory_order_relaxed);
    return;
  }
  g_live.fetch_sub(static_cast<int64_t>(::malloc_usable_size(p)), std::memory_order_relaxed);
  std::free(p);
}

}  // namespace

HeapStats heap_stats() { return {g_live.load(std::memory_order_relaxed), g_peak.load(std::memory_order_relaxed)}; }

CountedAsHeap::CountedAsHeap(int64_t bytes) : bytes_(bytes) { count_bytes(bytes); }

CountedAsHeap::~CountedAsHeap() { g_live.fetch_sub(bytes_, std::memory_order_relaxed); }

void heap_reset_peak() { g_peak.store(g_live.load(std::memory_order_relaxed), std::memory_order_relaxed); }

}  // namespace dtrain

// The replaceable global allocation functions ([new.delete]); every form routes to the two
// helpers above.
void* operator new(std::size_t n) { return dtrain::alloc(n, 0, false); }
void* operator new[](std::size_t n) { return dtrain::alloc(n, 0, false); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return dtrain::alloc(n, 0, true); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return dtrain::alloc(n, 0, true); }
void* operator new(std::size_t n, std::align_val_t a) { return dtrain::alloc(n, static_cast<std::size_t>(a), false); }
void* operator new[](std::size_t n, std::align_val_t a) { return dtrain::alloc(n, static_cast<std::size_t>(a), false); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return dtrain::alloc(n, static_cast<std::size_t>(a), true);
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return dtrain::alloc(n, static_cast<std::size_t>(a), true);
}
void operator delete(void* p) noexcept { dtrain::release(p); }
void operator delete[](void* p) noexcept { dtrain::release(p); }
void operator delete(void* p, std::size_t) noexcept { dtrain::release(p); }
void operator delete[](void* p, std::size_t) noexcept { dtrain::release(p); }
void operator delete(void* p, std::align_val_t) noexcept { dtrain::release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { dtrain::release(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { dtrain::release(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { dtrain::release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { dtrain::release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { dtrain::release(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { dtrain::release(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { dtrain::release(p); }
