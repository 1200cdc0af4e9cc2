// base/huge_pages.h — asks the kernel to back large blocks with transparent huge pages.
//
// Contract
// - advise_huge_pages(p, n) gives madvise(MADV_HUGEPAGE) to the whole 2 MiB pages inside
//   [p, p + n) — from p rounded up to 2 MiB to p + n rounded down — and returns how many
//   bytes it advised: 0 when no whole page fits, when the kernel refuses (no THP, or THP set to
//   "never"), or on a platform without it. Advice only: it never fails and never moves data.
//   Bytes outside the whole pages keep small pages, so the block's memory is never rounded
//   up: the resident set stays within the block, and base/heap_stats.h counts the same bytes.
// - huge_pages_wanted() is DTRAIN_HUGE_PAGES (default on), read once per process.
// - transparent_huge_pages_mode() is the kernel's setting, the bracketed word of
//   /sys/kernel/mm/transparent_hugepage/enabled ("always", "madvise", "never"), or "absent".
// - transparent_huge_pages_given(mode): whether a block advised as above gets huge pages
//   under that setting ("always" or "madvise").
// - shared_huge_pages_mode() is the kernel's setting for shared memory, the bracketed word of
//   /sys/kernel/mm/transparent_hugepage/shmem_enabled ("always", "within_size", "advise",
//   "never", "deny", "force"), or "absent"; shared_huge_pages_given(mode) says whether a
//   segment advised as above gets huge pages under it. The shared-memory windows and contexts
//   (coll/shm_context.h) are advised; Debian's default is "never", which refuses.
// - base/large_blocks.h maps every allocation of at least kHugePageBytes through operator new
//   (tensors, gradients, optimizer state, collective buffers) on 2 MiB boundaries and advises
//   it when huge pages are wanted.
//
// Why: the kernel pins every page of the range process_vm_readv / process_vm_writev copy (the
// shared-memory collectives, coll/shm_direct.cc), one page-table walk and reference count per
// page: 4,096 of them for 16 MiB in 4 KiB pages, 8 in 2 MiB ones. Kernels that stream a few MB
// (GEMM operands, optimizer steps) also miss the TLB less. Measured on the 2-vCPU Xeon VM
// (docs/history/sittings.md, "The sitting of 2026-11-29 20:03"): the 2-rank 16 MiB all-reduce 3.63 ->
// 2.37 ms. Shared memory, 2026-12-01 on the 2-vCPU EPYC VM (docs/TRAINING.md): ddp of the
// 11.6 MB MLP with its windows in 2 MiB pages (shmem_enabled "advise") against 4 KiB ones,
// three interleaved rounds: 4 ranks on 2 cores 17.0-17.4k against 16.0-16.1k examples/s,
// 2 ranks alike within the noise.
// Thread-safety: both are safe from any thread.
#pragma once

#include <cstddef>
#include <string>

namespace dtrain {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

size_t advise_huge_pages(void* p, size_t n);
bool huge_pages_wanted();
std::string transparent_huge_pages_mode();
bool transparent_huge_pages_given(const std::string& mode);
std::string shared_huge_pages_mode();
bool shared_huge_pages_given(const std::string& mode);

}  // namespace dtrain
