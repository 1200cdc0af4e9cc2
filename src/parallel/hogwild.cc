#include "parallel/hogwild.h"

#include <algorithm>

#include "base/aligned.h"
#include "base/copy.h"
#include "base/error.h"

namespace dtrain {

Hogwild::Hogwild(TrainableModel& model, const float* lr, int threads, Mode mode)
    : ModelStrategy(model, nullptr), lr_(lr), threads_(threads), mode_(mode), pool_(threads) {
  DT_CHECK(threads >= 1, InvalidArgument, "--threads must be >= 1, got " << threads);
  if (model.sparse() == nullptr) {
    const auto p = static_cast<size_t>(model.num_params());
    for (int t = 0; t < threads; ++t) {
      replicas_.push_back(model.make_replica());
      snapshots_.emplace_back(p);
      grads_.emplace_back(p);
    }
  }
}

// One thread's stream for a sparse model. For each minibatch: score every example at the
// current shared parameters and keep its dL/ds; then apply the B updates, each scaled by
// -lr/B. With B = 1 this is the paper's per-example step.
namespace {
// Every row the example `row` reads and writes in the model `w` (k floats a row).
void prefetch_rows(const float* w, const SparseRow& row, int k) {
  for (int64_t q = 0; q < row.nnz; ++q) prefetch_row_for_write(w + int64_t{row.idx[q]} * k, k);
}
}  // namespace

LossAcc Hogwild::run_stream_sparse(std::span<const int64_t> stream, int64_t batch, float lr,
                                   const ProgressFn* progress, int64_t scale) {
  const SparseLinear& m = *model_.sparse();
  const data::Dataset& ds = model_.train_set();
  float* w = model_.params().data();
  const int k = m.outputs();
  // Scratch on lines of its own: another thread's allocation on the same line would be
  // written by both cores every example (base/aligned.h, own_lines).
  AlignedVector<float> scores = own_lines<float>(static_cast<size_t>(k));
  AlignedVector<float> dscores = own_lines<float>(static_cast<size_t>(k * batch));
  LossAcc acc;
  const auto n = static_cast<int64_t>(stream.size());
  // As in hogwild-hot (parallel/hogwild_hot.cc): with other threads writing, the next
  // example's rows are asked for, for writing, while this one is computed. A memory hint,
  // not a change to the algorithm: the same lock-free updates in the same order per thread.
  // news20, 2 threads, three interleaved pairs: 0.99M -> 1.09M, 0.33M -> 0.76M and 0.67M ->
  // 1.15M examples/s. One thread runs without (nobody else owns its lines: -5%).
  const bool prefetch = threads_ > 1 && mode_ == Mode::kLockFree;
  auto minibatch = [&](auto access, int64_t first, int64_t len) {
    using Access = decltype(access);
    const float step = -lr / static_cast<float>(len);
    for (int64_t i = 0; i < len; ++i) {
      const int64_t e = stream[static_cast<size_t>(first + i)];
      const int label = ds.labels[static_cast<size_t>(e)];
      if (prefetch && first + i + 1 < n) prefetch_rows(w, ds.sparse_row(stream[static_cast<size_t>(first + i + 1)]), k);
      m.scores<Access>(w, ds.sparse_row(e), scores.data());
      acc.correct += m.predict_from_scores(scores.data()) == label;
      acc.loss += m.loss_and_dscore(scores.data(), label, dscores.data() + i * k);
    }
    for (int64_t i = 0; i < len; ++i)
      m.update<Access>(w, ds.sparse_row(stream[static_cast<size_t>(first + i)]), dscores.data() + i * k, step);
  };
  for (int64_t first = 0; first < n; first += batch) {
    const int64_t len = std::min(batch, n - first);
    // Alone, in either mode, a thread takes the locked path's plain loads and stores (the
    // mutex is never contended); the same arithmetic per coordinate as the relaxed atomics.
    if (mode_ == Mode::kLockFree && threads_ > 1) {
      minibatch(RelaxedAccess{}, first, len);
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      minibatch(PlainAccess{}, first, len);
    }
    acc.examples += len;
    if (progress && (first / batch) % 64 == 63) (*progress)(acc.examples * scale, acc.loss / static_cast<double>(acc.examples));
  }
  return acc;
}

// One thread's stream for a dense model: snapshot, gradient on the snapshot, update.
LossAcc Hogwild::run_stream_dense(int t, std::span<const int64_t> stream, int64_t batch, float lr,
                                  const ProgressFn* progress, int64_t scale) {
  std::span<float> shared = model_.params();
  auto& snap = snapshots_[static_cast<size_t>(t)];
  auto& grad = grads_[static_cast<size_t>(t)];
  Replica& rep = *replicas_[static_cast<size_t>(t)];
  const size_t p = shared.size();
  LossAcc acc;
  const auto n = static_cast<int64_t>(stream.size());
  for (int64_t first = 0; first < n; first += batch) {
    const int64_t len = std::min(batch, n - first);
    if (mode_ == Mode::kLockFree) {
      for (size_t i = 0; i < p; ++i) snap[i] = RelaxedAccess::load(&shared[i]);
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      copy_elements(snap.data(), shared.data(), shared.size());
    }
    LossAcc r = rep.loss_grad(snap, stream.subspan(static_cast<size_t>(first), static_cast<size_t>(len)), grad);
    if (mode_ == Mode::kLockFree) {
      for (size_t i = 0; i < p; ++i) RelaxedAccess::add(&shared[i], -lr * grad[i]);
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < p; ++i) shared[i] -= lr * grad[i];
    }
    acc.loss += r.loss * static_cast<double>(r.examples);
    acc.correct += r.correct;
    acc.examples += r.examples;
    if (progress) (*progress)(acc.examples * scale, acc.loss / static_cast<double>(acc.examples));
  }
  return acc;
}

LossAcc Hogwild::run_epoch(std::span<const int64_t> order, int64_t batch, const ProgressFn& progress) {
  DT_CHECK(batch >= 1, InvalidArgument, "--batch must be >= 1, got " << batch);
  const float lr = *lr_;
  const auto n = static_cast<int64_t>(order.size());
  std::vector<LossAcc> parts(static_cast<size_t>(threads_));
  // parallel_for over thread ids with grain 1 gives each pool thread exactly one stream;
  // stream 0 runs on the calling thread, which is the one allowed to report progress.
  pool_.parallel_for(0, threads_, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      auto stream = order.subspan(static_cast<size_t>(n * t / threads_), static_cast<size_t>(n * (t + 1) / threads_ - n * t / threads_));
      const ProgressFn* report = (t == 0 && progress) ? &progress : nullptr;
      parts[static_cast<size_t>(t)] = model_.sparse()
                                          ? run_stream_sparse(stream, batch, lr, report, threads_)
                                          : run_stream_dense(static_cast<int>(t), stream, batch, lr, report, threads_);
    }
  });
  LossAcc total;
  for (const auto& p : parts) {
    total.loss += p.loss;
    total.correct += p.correct;
    total.examples += p.examples;
  }
  // Sparse streams return loss sums; dense ones too (mean * count), so divide once.
  if (total.examples) total.loss /= static_cast<double>(total.examples);
  return total;
}

}  // namespace dtrain
