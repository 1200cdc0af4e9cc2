// base/large_blocks.h — the allocator's own path for blocks of 2 MiB or more: mapped on 2 MiB
// boundaries in transparent huge pages, and kept for reuse when freed.
//
// Contract
// - large_block_allocate(n, align) returns a block of at least n bytes that starts on a 2 MiB
//   boundary, or nullptr when this path does not take the request: n under kHugePageBytes, an
//   alignment above 2 MiB, DTRAIN_HUGE_PAGES=0, a sanitizer build (ASan and TSan keep
//   watching every block through malloc), a module whose operator new is not the process's
//   (a Python extension: another library's operator delete could free the block), the kernel
//   refusing the mapping, or kMaxLiveBlocks blocks already live. The caller then allocates
//   from malloc as before.
// - The block's length is n rounded up to 4 KiB. Its whole 2 MiB pages are advised to take
//   transparent huge pages (base/huge_pages.h); its tail keeps small pages, so the resident set
//   stays within the block.
// - large_block_release(p) returns the block's length when p is a live large block, after
//   keeping it for reuse (a later request of the same length takes it back, pages already
//   faulted in and huge) or unmapping it; 0 when p is not one (then it is malloc's). Kept
//   blocks are bounded: kMaxCachedBlocks and kMaxCachedBytes, the least recently freed
//   unmapped first; a block longer than kMaxKeptBlockBytes is unmapped at once. The bounds
//   are glibc's own for its heap (it maps blocks above 32 MiB afresh every time and trims
//   its heap's top beyond twice that): freed memory this keeps stays resident, and keeping
//   256 MiB raised the peak resident set of a training run by 165 MB (a dataset's staging
//   buffers kept after it was built).
// - base/heap_stats.cc routes operator new / delete through these two; the lengths are what
//   heap_stats() counts for them.
//
// Why a path of its own. Advising malloc's blocks (glibc maps a large block afresh only below
// its dynamic threshold; after a large block is freed the threshold rises, up to 32 MiB, and
// blocks under it come from the heap) leaves most of them on the small pages the heap had
// already faulted in: on the 2-vCPU Xeon VM the 2-rank 16 MiB all-gather took 1.70-1.72 ms on
// fresh blocks and 2.25-2.28 ms after a 256 MiB all-reduce had run in the same process. Mapping
// them here keeps every one on 2 MiB boundaries and huge; keeping freed ones spares a
// transient block (a collective's buffer, a step's temporary) the faults and the zeroing of
// its pages each time, which glibc's heap had spared it.
// Thread-safety: both are safe from any thread (one mutex, held across fork() like malloc's;
// nothing here allocates). The registry is constant-initialised, so no first use can be caught
// half done by a fork(). The process decides once whether it takes large blocks (reading the
// setting); a child forked while another thread was making that decision has them off, since
// the settings' own first-use initialisation may be what that thread was inside.
#pragma once

#include <cstddef>
#include <string>

namespace dtrain {

// Whether this build takes large blocks at all (not under ASan or TSan).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kLargeBlocksInThisBuild = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kLargeBlocksInThisBuild = false;
#else
inline constexpr bool kLargeBlocksInThisBuild = true;
#endif
#else
inline constexpr bool kLargeBlocksInThisBuild = true;
#endif

inline constexpr int kMaxLiveBlocks = 4096;
inline constexpr int kMaxCachedBlocks = 16;
inline constexpr size_t kMaxCachedBytes = size_t{64} << 20;
inline constexpr size_t kMaxKeptBlockBytes = size_t{32} << 20;

// A large block's length: n rounded up to 4 KiB (what heap_stats counts for it).
inline size_t large_block_length(size_t n) { return (n + 4095) / 4096 * 4096; }

void* large_block_allocate(size_t n, size_t align);
size_t large_block_release(void* p);
// Whether this process takes large blocks (every condition above but the request's own), and
// a line saying where blocks of 2 MiB or more live and why, for benchmarks' headers.
bool large_blocks_taken();
std::string large_blocks_description();

}  // namespace dtrain
