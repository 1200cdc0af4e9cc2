// parallel/hogwild.h — HOGWILD! (Niu, Recht, Re, Wright 2011): lock-free parallel SGD on one
// shared model, and the locking baseline it is compared against.
//
// Algorithm. The epoch's example order is cut into T contiguous streams, one per thread.
// Each thread repeatedly takes the next minibatch of its stream (B = 1 is the paper's
// setting), reads the shared parameters, computes the gradient and subtracts lr * gradient
// from the shared parameters — with no lock. The threads' reads and writes interleave
// freely; an update may be computed from parameters another thread is changing, and two
// threads' updates of the same coordinate may overwrite each other. The paper proves SGD
// still converges at nearly the serial rate when updates are sparse (each example touches
// few coordinates), because collisions are rare.
//
//   sparse models  a thread computes each example's scores from the row's coordinates and
//                  adds -lr/B * x_j dL/ds_c to exactly those coordinates (plus biases) —
//                  reads and writes through RelaxedAccess (std::atomic_ref<float>, relaxed),
//                  so every access is atomic (TSan-clean) but a read-add-write is not:
//                  a lost update is the benign race HOGWILD! accepts. With T > 1 the next
//                  example's rows are prefetched for writing while this one is computed
//                  (a memory hint: the updates and their order are unchanged).
//   dense models   (the MLP) a thread copies the shared parameters with relaxed loads into
//                  its own snapshot, computes the minibatch gradient there, then applies it
//                  to the shared buffer with relaxed load+store per coordinate.
//
// Locked baseline (Mode::kLocked): the same loop with one mutex; sparse models hold it for
// the whole read-compute-write of each minibatch, dense models for the snapshot and for the
// update (the gradient is computed outside it). With T = 1 both modes are plain serial SGD,
// and a sparse model's lone thread reads and writes plainly (no atomics: nobody else
// touches the model), which lets the compiler vectorise the K-output loops.
//
// Only plain SGD (a constant lr per epoch, optional L2 in the sparse model) is supported:
// momentum and Adam state would be shared mutable state outside the paper's scheme.
// Losses and accuracies are measured as examples are processed; the per-thread totals are
// combined in thread order. Results with T > 1 depend on timing (that is the point).
// Thread-safety: one driver thread; the strategy runs its own T threads.
#pragma once

#include <mutex>
#include <vector>

#include "parallel/model_strategy.h"

namespace dtrain {

// Asks for the cache lines of one model row (k floats at w) in the exclusive state, ahead of
// a read and a write of it: x86 PREFETCHW (a no-op hint where unsupported), a write prefetch
// elsewhere. Used by the sparse HOGWILD! kernels (here and parallel/hogwild_hot.cc) on the
// next example's rows while the current one is computed.
inline void prefetch_row_for_write(const float* w, int k) {
#if defined(__x86_64__)
  asm volatile("prefetchw %0" ::"m"(*w));
  asm volatile("prefetchw %0" ::"m"(w[k - 1]));
#else
  __builtin_prefetch(w, 1, 3);
  __builtin_prefetch(w + k - 1, 1, 3);
#endif
}

class Hogwild : public ModelStrategy {
 public:
  enum class Mode { kLockFree, kLocked };
  // lr is read from *lr on every epoch (the trainer's schedule may change it).
  Hogwild(TrainableModel& model, const float* lr, int threads, Mode mode);
  const char* name() const override { return mode_ == Mode::kLockFree ? "hogwild" : "hogwild-lock"; }
  int threads() const override { return threads_; }
  LossAcc run_epoch(std::span<const int64_t> order, int64_t batch, const ProgressFn& progress) override;

 private:
  LossAcc run_stream_sparse(std::span<const int64_t> stream, int64_t batch, float lr, const ProgressFn* progress,
                            int64_t scale);
  LossAcc run_stream_dense(int t, std::span<const int64_t> stream, int64_t batch, float lr,
                           const ProgressFn* progress, int64_t scale);

  const float* lr_;
  int threads_;
  Mode mode_;
  ThreadPool pool_;
  std::mutex mu_;  // kLocked only
  std::vector<std::unique_ptr<Replica>> replicas_;  // dense: one per thread
  std::vector<std::vector<float>> snapshots_, grads_;
};

}  // namespace dtrain
