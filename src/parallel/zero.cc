// parallel/zero.cc — ZeRO stages 0-2 over a data-parallel communicator.
//
// One step, by stage (N ranks, shard [off, off + len) of rank r):
//   0    all-reduce(avg) g          -> clip over g               -> optimizer over all n
//   1/2  reduce-scatter(sum) g / N  -> clip: shard squares summed -> optimizer over the shard
//                                                                 -> all-gather(v) the shards
// (a reduce-scatter plus an all-gather move what one all-reduce moves). Stage 1 writes its
// gradient shard back into the caller's full buffer (gradient memory is not sharded), stage
// 2 into its own shard buffer (the caller may free the full one between steps). The clip norm
// must be the norm of the WHOLE mean gradient: stage 0 holds it entirely (every rank the
// same values), stages 1/2 disjoint pieces whose squares are summed over the ranks.
#include "parallel/zero.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "coll/collectives.h"
#include "optim/clip.h"

namespace dtrain {

void ZeroComm::add(const char* kind, int64_t full_bytes, int n) {
  const double frac = n > 1 ? static_cast<double>(n - 1) / n : 0.0;
  const std::string k(kind);
  if (k == "allreduce") {
    ++allreduce;
    bus_bytes += 2.0 * frac * static_cast<double>(full_bytes);
  } else if (k == "allgather") {
    ++allgather;
    bus_bytes += frac * static_cast<double>(full_bytes);
  } else {
    ++reduce_scatter;
    bus_bytes += frac * static_cast<double>(full_bytes);
  }
}

std::pair<int64_t, int64_t> zero_shard(int64_t n, int ranks, int r) {
  const int64_t per = (n + ranks - 1) / ranks;
  const int64_t off = std::min<int64_t>(n, per * r);
  return {off, std::min<int64_t>(per, n - off)};
}

double weighted_sumsq(std::span<const float> g, const std::vector<float>& w, int64_t off) {
  if (w.empty()) return grad_sumsq(g);
  double s = 0;
  for (size_t i = 0; i < g.size(); ++i) s += static_cast<double>(w[static_cast<size_t>(off) + i]) * g[i] * g[i];
  return s;
}

ZeroOptimizer::ZeroOptimizer(Communicator* dp, int stage, int64_t n, const OptimizerConfig& config)
    : dp_(dp), stage_(stage), ranks_(dp ? dp->size() : 1), rank_(dp ? dp->rank() : 0), n_(n) {
  DT_CHECK(stage >= 0 && stage <= 2, InvalidArgument, "ZeroOptimizer handles stages 0-2 (stage 3: parallel/zero3.h), got " << stage);
  if (stage == 0) {
    off_ = 0;
    len_ = n;
  } else {
    std::tie(off_, len_) = zero_shard(n, ranks_, rank_);
  }
  opt_ = make_optimizer(config, len_);
  if (stage == 2) shard_grad_.assign(static_cast<size_t>(len_), 0.0f);
}

double ZeroOptimizer::step(std::span<float> params, std::span<float> grads, float lr, const ClipOptions& clip) {
  DT_CHECK(static_cast<int64_t>(params.size()) == n_ && static_cast<int64_t>(grads.size()) == n_, InvalidArgument,
           "ZeroOptimizer: expected " << n_ << " parameters and gradients, got " << params.size() << " and " << grads.size());
  const int64_t bytes = n_ * 4;
  std::span<float> g;
  double sq = 0;
  if (stage_ == 0) {
    if (ranks_ > 1) {
      allreduce(*dp_, grads.data(), grads.size(), DType::kFloat32, ReduceOp::kAvg);
      comm_.add("allreduce", bytes, ranks_);
    }
    if (clip.max_norm > 0) sq = weighted_sumsq(grads, clip.norm_weight, 0);
    g = grads;
  } else {
    // Reduce-scatter: this rank receives the summed gradient of its shard only. Stage 1
    // keeps it in its place in the (full, unsharded) gradient buffer, stage 2 in the shard
    // buffer (the full one is the caller's scratch).
    const int64_t per = (n_ + ranks_ - 1) / ranks_;
    std::vector<float> padded(static_cast<size_t>(per * ranks_), 0.0f);
    std::copy(grads.begin(), grads.end(), padded.begin());
    std::vector<float> mine(static_cast<size_t>(per));
    if (ranks_ > 1) {
      reduce_scatter(*dp_, padded.data(), mine.data(), static_cast<size_t>(per), DType::kFloat32, ReduceOp::kSum);
      comm_.add("reduce_scatter", per * ranks_ * 4, ranks_);
    } else {
      mine.assign(padded.begin(), padded.begin() + per);
    }
    g = stage_ == 2 ? std::span<float>(shard_grad_) : grads.subspan(static_cast<size_t>(off_), static_cast<size_t>(len_));
    const float inv = 1.0f / static_cast<float>(ranks_);
    for (int64_t i = 0; i < len_; ++i) g[static_cast<size_t>(i)] = mine[static_cast<size_t>(i)] * inv;
    if (clip.max_norm > 0) {
      sq = weighted_sumsq(g, clip.norm_weight, off_);
      if (ranks_ > 1) allreduce(*dp_, &sq, 1, DType::kFloat64, ReduceOp::kSum);
    }
  }
  double norm = 0;
  if (clip.max_norm > 0) {
    if (clip.extra_reduce) sq = clip.extra_reduce(sq);
    norm = std::sqrt(sq);
    clip_by_norm(g, norm, clip.max_norm);
  }
  opt_->set_lr(lr);
  opt_->step(params.subspan(static_cast<size_t>(off_), static_cast<size_t>(len_)), g);
  if (stage_ >= 1 && ranks_ > 1) {
    std::vector<size_t> counts;
    for (int r = 0; r < ranks_; ++r) counts.push_back(static_cast<size_t>(zero_shard(n_, ranks_, r).second));
    std::vector<float> mine(params.begin() + off_, params.begin() + off_ + len_);
    allgatherv(*dp_, mine.data(), params.data(), counts, DType::kFloat32);
    comm_.add("allgather", bytes, ranks_);
  }
  return norm;
}

ZeroBytes ZeroOptimizer::bytes() const {
  ZeroBytes b;
  b.params = n_ * 4;
  b.grads = stage_ == 2 ? static_cast<int64_t>(shard_grad_.size()) * 4 : n_ * 4;
  b.optimizer = static_cast<int64_t>(opt_->save_state().size());
  return b;
}

}  // namespace dtrain
