// parallel/hogwild_hot.h — HOGWILD! with the hot features kept per thread ("hogwild-hot"):
// lock-free shared updates for the rarely written coordinates, private copies merged every M
// examples for the few coordinates every thread writes all the time.
//
// Why. Plain HOGWILD! (parallel/hogwild.h) lets every thread write one shared model. On
// news20 the 1,000 most frequent of 60k features carry 40% of all occurrences (one is in half
// of the documents), and the biases are written by every example, so two cores write the same
// cache lines on almost every example: each write invalidates the other core's copy and each
// read fetches it back. That coherence traffic, not arithmetic, held 2 threads to ~1.1x of one
// while private copies of the model ran 1.8x (docs/ACCURACY.md). The HOGWILD! analysis assumes
// conflicts are rare; they are rare for the cold features only.
//
// Algorithm.
//   Hot set. Count for each feature the training rows it occurs in (its document frequency);
//   the H most frequent are hot (ties: lower index first), and so are the K biases. Every
//   other feature is cold. H is given, or chosen automatically (auto_hot_count): a feature is
//   hot when it occurs in at least 4 * rows / M rows, i.e. each thread is expected to write it
//   at least 4 times per merge window; a merge writes its row once, so the private copy costs
//   at most a quarter of the shared writes it replaces (with 1x instead of 4x, news20 kept
//   11,467 features hot and the merges took ~13% of a thread's time); capped so a thread's
//   copy stays within kMaxHotFloats.
//   Per thread t. local_t holds the hot coordinates (H*K weights in feature order, then K
//   biases, on cache lines of their own) and base_t the shared values local_t was last synchronised with.
//   Each minibatch (B = 1 is the paper's setting) is scored and updated exactly as in
//   HOGWILD! (score all B at the current parameters, then apply B updates of -lr/B), except
//   that a hot coordinate is read from and written to local_t, and only a cold one to the
//   shared buffer (relaxed atomics: a concurrent update of the same cold coordinate can be
//   lost, HOGWILD!'s benign race). Each row's nonzeros are stored once, at construction,
//   hot ones first (as slots of the hot copy) and cold ones after (as features), so scoring
//   and updating are two plain loops: the hot one over private memory with plain loads and
//   stores, which the compiler vectorises, the cold one through the relaxed atomics. While a
//   thread computes an example it asks for the next example's cold rows (for writing): a row
//   the other core wrote last is a cross-core transfer.
//   At the start of each epoch every thread's local and base are set from the shared model.
//   Streams. The threads claim the epoch's order in chunks of kChunkExamples (rounded up to
//   whole minibatches) from one atomic cursor, so a thread on a faster or less busy core
//   trains more examples and both finish within a chunk of each other (with fixed halves of
//   the order the faster one idled at every epoch's end: 2 threads used ~1.74 cores).
//   Merge. After every M examples of its stream, and at its end, thread t takes the merge
//   mutex (with T = 1 there is nobody to merge with: only at the end) and for every hot
//   coordinate i sets (within a stream, a thread that finds the mutex held goes on training
//   and tries again after its next minibatch: the threads reach their merges together, and
//   waiting out each other's merge idled a core)
//       shared_i = shared_i + w * (local_i - base_i);   local_i = base_i = shared_i;
//   i.e. it adds (a share of) the change it made since its last merge to the shared value and
//   takes up the changes the other threads merged meanwhile. Two rules:
//     average (w = 1/T, the default)  local-SGD model averaging of the hot coordinates;
//     sum     (w = 1)                 every example's hot update counts once, as in HOGWILD!.
//   Why average is the default: a thread sees the others' hot updates up to about T*M examples
//   late, and the hottest coordinates (biases, a word in half the documents) settle within far
//   fewer examples than that. Then every thread moves a coordinate by about the same correction
//   in a window and the sum applies it T times: the error is multiplied by about (1 - T) per
//   window, which oscillates for T = 2 and diverges for T > 2 (measured: news20, M = 1024,
//   4 threads, sum: accuracy 0.47; average 0.82). Averaging applies the common correction once
//   and is stable for any M and T; its cost is that hot coordinates move at about lr/T between
//   merges where their updates do not overlap, and hot coordinates are by construction the
//   best-estimated ones. sum is right for windows short against that settling time.
//   With T = 1 both rules leave the shared value = local_i exactly (no arithmetic), so the run
//   is plain serial SGD bit for bit (the same kernel order as SparseLinear::sgd_example).
//   (Under sum the same holds whenever no other thread changed the value: shared_i == base_i.)
//   Cyclades-style conflict-free scheduling (Pan et al. 2016) was not chosen: two random
//   news20 documents share a feature with probability 0.69, so the conflict graph of any batch
//   of more than a few examples is one connected component and nothing runs in parallel.
// Memory model: the shared buffer's hot coordinates are touched during an epoch only by merges,
// which hold the mutex; cold coordinates only through RelaxedAccess. So no access is a data
// race in the C++ sense (TSan-clean), as with plain HOGWILD!. Between epochs every thread has
// merged, so params() holds the whole model (evaluation, checkpoints).
//
// Only sparse linear models (logreg, svm, softmax) with plain SGD (optional lazy L2).
// Thread-safety: one driver thread; the strategy runs its own T threads.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "parallel/model_strategy.h"

namespace dtrain {

class Hogwild;

// For every feature of ds, the number of rows it occurs in.
std::vector<int64_t> feature_row_counts(const SparseRows& ds);
// The `count` features with the largest counts, most frequent first, ties by lower index;
// features that never occur are never chosen (so fewer than `count` may come back).
// Throws InvalidArgument when count < 0.
std::vector<int32_t> most_frequent_features(const std::vector<int64_t>& counts, int64_t count);
// The automatic hot-set size: the number of features occurring in at least
// ceil(kHotWritesPerWindow * rows / merge_every) rows, capped at kMaxHotFloats / outputs.
inline constexpr int64_t kMaxHotFloats = int64_t{1} << 18;  // 1 MiB of floats per thread
inline constexpr int64_t kHotWritesPerWindow = 4;
// Examples a thread claims at a time from the epoch's order (HogwildHotOptions::balance):
// on news20 ~0.5 ms of work, against one atomic add per claim.
inline constexpr int64_t kChunkExamples = 256;
int64_t auto_hot_count(const std::vector<int64_t>& counts, int64_t rows, int64_t merge_every, int outputs);

struct HogwildHotOptions {
  int threads = 1;
  int64_t hot_features = -1;  // H; -1: auto_hot_count
  // M, examples of a thread's stream between its merges. 4096: on news20 at 2 threads it ran
  // +10% (VM's far mode) to +0-9% (near mode) over 1024, a9a 1.4x, with test accuracy
  // 0.831 / 0.848 against 0.837 / 0.850 at 1024 and 0.822 / 0.844 serial (40 / 5 epochs).
  int64_t merge_every = 4096;
  bool average = true;         // merge adds (local - base) / T; false: (local - base) (sum)
  // true: the threads claim the epoch's examples in chunks of kChunkExamples from one shared
  // cursor, so a thread that runs faster trains more of them and none idles at the epoch's end
  // (see run_epoch). false: thread t trains the t-th contiguous 1/T of the order, a fixed
  // assignment (the tests check the merge rule against it exactly).
  bool balance = true;
};

class HogwildHot : public ModelStrategy {
 public:
  // lr is read from *lr on every epoch. Throws InvalidArgument for a model that is not sparse,
  // threads < 1, merge_every < 1 or hot_features < -1.
  HogwildHot(TrainableModel& model, const float* lr, const HogwildHotOptions& options);
  ~HogwildHot() override;
  const char* name() const override { return "hogwild-hot"; }
  int threads() const override { return options_.threads; }
  std::string describe() const override;
  LossAcc run_epoch(std::span<const int64_t> order, int64_t batch, const ProgressFn& progress) override;
  Metrics epoch_metrics() override;

  const std::vector<int32_t>& hot_features() const { return hot_; }

 private:
  struct ThreadState;
  // Where a thread's examples come from: chunks of the epoch's order, from a shared cursor
  // (balance) or its own fixed range.
  struct Source;
  LossAcc run_stream(ThreadState& st, Source& source, int64_t batch, float lr, const ProgressFn* progress,
                     int64_t scale);
  void scores(const ThreadState& st, const float* shared, int64_t e, float* __restrict out) const;
  void update(ThreadState& st, float* shared, int64_t e, const float* dscore, float scale) const;
  void prefetch_cold(const float* shared, int64_t e) const;
  void pull(ThreadState& st);   // local = base = shared (hot coordinates), under the mutex
  // The merge rule above, under the mutex; wait false: only when the mutex is free (returns
  // whether it merged).
  bool merge(ThreadState& st, bool wait);

  const float* lr_;
  HogwildHotOptions options_;
  const SparseLinear* lin_;  // the model's (looked up once: sparse() is virtual)
  int k_;                    // its outputs K
  std::vector<int32_t> hot_;           // hot features, most frequent first
  std::vector<int32_t> slot_feature_;  // the same in feature order: slot h holds feature slot_feature_[h]
  // The training set's nonzeros, each row's hot ones first (in the row's order), then its
  // cold ones: idx_ holds the slot in the hot copy or the feature, val_ the value, and
  // hot_nnz_ per row how many are hot. Read sequentially with the row, no lookup per feature
  // and no test of which buffer a nonzero's row lives in.
  const int64_t* row_ptr_ = nullptr;  // the training set's (train_set() is virtual: looked up once)
  std::vector<int32_t> idx_;
  std::vector<float> val_;
  std::vector<int32_t> hot_nnz_;
  ThreadPool pool_;
  std::mutex merge_mu_;
  std::vector<std::unique_ptr<ThreadState>> states_;
  // One thread: nothing to keep private from anybody, so the epoch is serial SGD itself
  // (hogwild --threads 1: plain loads and stores), bit for bit what the hot copy would give,
  // without its indirection (news20: 0.87-0.90x of serial SGD's speed through the copy).
  std::unique_ptr<Hogwild> alone_;
  int64_t merges_ = 0;  // merges in the last epoch (epoch_metrics)
};

}  // namespace dtrain
