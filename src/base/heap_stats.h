// base/heap_stats.h — how many bytes the process's C++ heap allocations hold, now and at most.
//
// Contract
// - This file's .cc replaces the global operator new / delete (all forms, aligned included);
//   each allocation goes to malloc / aligned_alloc and its usable size is added to a live
//   counter, and subtracted again on delete. Allocations of 2 MiB or more go to
//   base/large_blocks.h instead where it takes them (mapped on 2 MiB boundaries in transparent
//   huge pages, kept for reuse when freed), counted as their length (n rounded up to 4 KiB).
//   Memory obtained otherwise (malloc called directly, mmap: OpenBLAS's buffers, shared-memory
//   transport segments, thread stacks) is not counted: these are the runtime, not the model.
//   tensor/ allocates its storage through the aligned operator new, so tensors, std::vectors
//   and every other container are counted.
// - heap_stats() returns {live, peak} bytes; heap_reset_peak() sets peak = live (to measure
//   the high-water mark of one phase: reset, run it, read peak).
// - The counters are the one mutable process-wide state besides the allocator itself
//   (docs/DESIGN.md): a statistic that nothing reads to decide behaviour.
// - The replacement is in the program only when something calls heap_stats() (static
//   linking pulls the object file in); in a program that does not, nothing changes.
// Thread-safety: relaxed atomics; concurrent allocations from any thread are counted.
#pragma once

#include <cstdint>

namespace dtrain {

struct HeapStats {
  int64_t live = 0, peak = 0;
};

HeapStats heap_stats();
void heap_reset_peak();

// Memory that stands for heap memory but is not allocated there (ddp's gradients in a
// shared-memory window, parallel/data_parallel.h) is counted as live while this lives.
class CountedAsHeap {
 public:
  explicit CountedAsHeap(int64_t bytes);
  ~CountedAsHeap();
  CountedAsHeap(const CountedAsHeap&) = delete;
  CountedAsHeap& operator=(const CountedAsHeap&) = delete;

 private:
  int64_t bytes_;
};

}  // namespace dtrain
