// base/heap_warm.h — the process's heap kept warm between training steps.
//
// Contract
// - keep_heap_warm(): for the rest of the process, glibc neither returns freed memory to the
//   kernel (trim threshold 1 GiB) nor gives blocks under 64 MiB mappings of their own, so a
//   step's activations reuse the pages the step before faulted in. Idempotent; a no-op
//   under ThreadSanitizer, whose allocator is its own (there glibc's arenas, set up by this
//   call from a rank thread, failed an assertion at that thread's exit: calibrate_tp_test).
//   Called by every training run (train/run.cc), the calibration's timing passes
//   (plan/calibrate_units.h) and compute_bench, so all three see the same heap.
//
// Why. Left to itself glibc trims the top of its heap and maps large blocks afresh, and the
// next step faults them in again: the MLP's 0.5 MB activations and gradients (batch 128,
// width 1024) spent 14% of compute_bench BM_MlpTrainStep's samples in the kernel's fault
// path on the EPYC VM; GPipe's M live micro-batches paid page faults every step; and a
// calibration pass that freed ~50 MB of activations at the top of an otherwise empty heap
// had them trimmed in some passes and not others (the 12-sequence width-128 GPT block read
// 4.3-6.0 ms forward, 4.2-4.3 warm, and the fitted line predicted the 1-rank GPT step 23-29%
// slow, 2-3% warm). Blocks of 2 MiB and more mostly take base/large_blocks.h's own path.
// Thread-safety: call before the threads that allocate heavily start (mallopt is global).
#pragma once

namespace dtrain {

void keep_heap_warm();

}  // namespace dtrain
