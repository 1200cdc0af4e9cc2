#include "parallel/threads.h"

#include <algorithm>

#include "base/error.h"

namespace dtrain {

SyncThreads::SyncThreads(TrainableModel& model, Optimizer& optimizer, int threads, int shards)
    : ModelStrategy(model, &optimizer), opt_(optimizer), threads_(threads), shards_(std::max(shards, threads)), pool_(threads) {
  DT_CHECK(threads >= 1, InvalidArgument, "--threads must be >= 1, got " << threads);
  DT_CHECK(shards >= 1, InvalidArgument, "shards must be >= 1, got " << shards);
  DT_CHECK_EQ(optimizer.size(), model.num_params(), InvalidArgument, "the optimizer must cover every parameter");
  const auto p = static_cast<size_t>(model.num_params());
  for (int k = 0; k < shards_; ++k) {
    replicas_.push_back(model.make_replica());
    shard_grads_.emplace_back(p);
  }
  shard_results_.resize(static_cast<size_t>(shards_));
  if (shards_ > 1) grad_.resize(p);  // one shard (single): its gradient is the batch's
}

// Phase 2: g = sum_k (n_k / B) g_k in shard order, coordinates split across threads.
void SyncThreads::sum_shards(int64_t b) {
  std::vector<float> weight(static_cast<size_t>(shards_));
  for (int k = 0; k < shards_; ++k)
    weight[static_cast<size_t>(k)] = static_cast<float>(shard_results_[static_cast<size_t>(k)].examples) / static_cast<float>(b);
  const int64_t p = model_.num_params();
  pool_.parallel_for(0, p, 4096, [&](int64_t lo, int64_t hi) {
    float* g = grad_.data();
    std::fill(g + lo, g + hi, 0.0f);
    for (int k = 0; k < shards_; ++k) {
      const float w = weight[static_cast<size_t>(k)];
      if (w == 0.0f) continue;
      const float* gk = shard_grads_[static_cast<size_t>(k)].data();
      for (int64_t i = lo; i < hi; ++i) g[i] += w * gk[i];
    }
  });
}

LossAcc SyncThreads::step(std::span<const int64_t> batch) {
  const auto b = static_cast<int64_t>(batch.size());
  DT_CHECK(b >= 1, InvalidArgument, "empty minibatch");
  std::span<const float> params = model_.params();
  // Phase 1: per-shard mean gradients, shard k by replica k (any thread).
  pool_.parallel_for(0, shards_, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t k = lo; k < hi; ++k) {
      const int64_t first = b * k / shards_, last = b * (k + 1) / shards_;
      auto& out = shard_grads_[static_cast<size_t>(k)];
      shard_results_[static_cast<size_t>(k)] =
          first == last ? LossAcc{} : replicas_[static_cast<size_t>(k)]->loss_grad(params, batch.subspan(first, last - first), out);
    }
  });
  // One shard (single): n_0 / B = 1, so its gradient is the batch's as it stands. Summing it
  // into grad_ anyway (zero-fill, then add) took a quarter of a step of the 784-256-128-10
  // MLP at batch 4 (perf), two passes over the model for nothing. (The sum would also turn a
  // -0 entry into +0; the optimizers step both alike.)
  if (shards_ == 1) {
    opt_.step(model_.params(), shard_grads_[0]);
  } else {
    sum_shards(b);
    opt_.step(model_.params(), grad_);
  }
  LossAcc r;
  for (const auto& s : shard_results_) {
    r.loss += s.loss * static_cast<double>(s.examples);
    r.correct += s.correct;
    r.examples += s.examples;
  }
  r.loss /= static_cast<double>(b);
  return r;
}

LossAcc SyncThreads::run_epoch(std::span<const int64_t> order, int64_t batch, const ProgressFn& progress) {
  DT_CHECK(batch >= 1, InvalidArgument, "--batch must be >= 1, got " << batch);
  LossAcc total;
  const auto n = static_cast<int64_t>(order.size());
  for (int64_t first = 0; first < n; first += batch) {
    const int64_t len = std::min(batch, n - first);
    LossAcc r = step(order.subspan(first, len));
    total.loss += r.loss * static_cast<double>(r.examples);
    total.correct += r.correct;
    total.examples += r.examples;
    if (progress) progress(total.examples, total.loss / static_cast<double>(total.examples));
  }
  if (total.examples) total.loss /= static_cast<double>(total.examples);
  return total;
}

}  // namespace dtrain
