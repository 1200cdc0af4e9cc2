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

#include "base/clock.h"
#include "base/copy.h"
#include "base/error.h"
#include "coll/collectives.h"
#include "coll/shm_context.h"
#include "optim/clip.h"

namespace dtrain {
namespace {

std::string coll_bytes(int64_t bytes) { return "\"bytes\":" + std::to_string(bytes); }

}  // namespace

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

ZeroOptimizer::ZeroOptimizer(Communicator* dp, int stage, int64_t n, const OptimizerConfig& config,
                             std::vector<std::pair<int64_t, int64_t>> buckets, bool average, bool fused)
    : dp_(dp), stage_(stage), ranks_(dp ? dp->size() : 1), rank_(dp ? dp->rank() : 0), n_(n), average_(average),
      fused_(fused) {
  DT_CHECK(stage >= 0 && stage <= 2, InvalidArgument, "ZeroOptimizer handles stages 0-2 (stage 3: parallel/zero3.h), got " << stage);
  DT_CHECK(!fused || stage > 0, InvalidArgument, "ZeroOptimizer: the fused step shards the optimizer (stage 1 or 2)");
  if (buckets.empty()) buckets.push_back({0, n});
  int64_t at = 0, next = 0;
  for (const auto& [begin, len] : buckets) {
    DT_CHECK(begin == next && len >= 0, InvalidArgument, "ZeroOptimizer: buckets must tile [0, " << n << ") in order");
    next = begin + len;
    Slice s{begin, len, begin, len, at};
    if (stage > 0) {
      const auto [off, l] = zero_shard(len, ranks_, rank_);
      s.mine = begin + off;
      s.mine_len = l;
    }
    at += s.mine_len;
    buckets_.push_back(s);
  }
  DT_CHECK(next == n, InvalidArgument, "ZeroOptimizer: buckets cover " << next << " of " << n << " elements");
  len_ = at;
  opt_ = make_optimizer(config, len_);
  if (stage > 0 && !fused) shard_grad_.assign(static_cast<size_t>(len_), 0.0f);
}

Algorithm ZeroOptimizer::reduce(int bucket, std::span<float> grads, std::span<float> params, bool params_shared) {
  if (!fused_) {
    reduce(bucket, grads);
    return Algorithm::kNaive;
  }
  DT_CHECK(static_cast<int64_t>(params.size()) == n_ && static_cast<int64_t>(grads.size()) == n_, InvalidArgument,
           "ZeroOptimizer: expected " << n_ << " parameters and gradients, got " << params.size() << " and " << grads.size());
  const Slice& s = buckets_[static_cast<size_t>(bucket)];
  std::vector<size_t> counts;
  for (int r = 0; r < ranks_; ++r) counts.push_back(static_cast<size_t>(zero_shard(s.len, ranks_, r).second));
  float* p = params.data() + s.begin;
  const int64_t mine = s.mine - s.begin;  // this rank's slice, from the bucket's start
  const float inv = average_ ? 1.0f / static_cast<float>(ranks_) : 1.0f;
  Optimizer& opt = *opt_;
  // The pieces of this rank's slice arrive summed; scale them and step the parameters where
  // they lie (this rank's recv: the collective shares them from there).
  // Shared parameters are stepped in a scratch copy and copied back, unless two ranks with a
  // core each sit close. Every rank read these lines in its forward, and a step in place
  // (read, modify, write each line) takes each line back from the other core's cache with
  // the load before its store; a copy into lines it holds overwrites them whole. A two-core
  // loop (1 MiB, the peer reading every line between passes, the cores far): the momentum
  // step in place 736 us, stepped in a scratch and copied back 290 us. The sitting's ddp job
  // (11.6 MB MLP, momentum, batch 256, three interleaved rounds, far): 2 ranks 16,209-17,041 ->
  // 16,774-17,949 examples/s, 4 ranks on 2 cores 14,707-15,329 -> 15,136-15,511.
  const ShmContext* ctx = dp_->shm_context();
  const bool via_scratch = params_shared && (!ctx || ctx->oversubscribed() || ctx->cores_far());
  std::vector<float>& tmp = step_scratch_;
  // Steps this rank's piece at `off` with the sum of k gradient terms (Optimizer::update_sum).
  auto step_piece = [&](size_t off, const float* const* terms, int k, size_t len) {
    const int64_t at = s.at + static_cast<int64_t>(off) - mine;
    const std::span<const float* const> ts(terms, static_cast<size_t>(k));
    const std::span<float> here(p + off, len);
    if (!via_scratch) {
      opt.update_sum(here, here, ts, at);
      return;
    }
    if (tmp.size() < len) tmp.resize(len);
    opt.update_sum(std::span<float>(tmp.data(), len), here, ts, at);
    copy_elements(p + off, tmp.data(), len);
  };
  auto apply = [&](size_t off, float* values, size_t len) {
    if (inv != 1.0f)
      for (size_t i = 0; i < len; ++i) values[i] *= inv;
    const float* sum = values;
    step_piece(off, &sum, 1, len);
    return true;
  };
  // Where the owners read every rank's gradient where it lies (the window, the shared
  // parameters), the optimizer takes them as they are and adds them itself: one pass over
  // the inputs, the stepped piece written to the scratch (or in place), no buffer of sums.
  // A two-core loop over the sitting's 11.6 MB model (each core first reading the parameters
  // and writing its gradient, as forward and backward do): the sum, copy in, step, copy
  // back 1.47-1.74 ms; one pass into the scratch, copied back, 1.14-1.30 ms.
  // (Past Optimizer::kMaxTerms ranks: the sum, then the step.)
  ApplySumFn apply_sum;
  if (params_shared && inv == 1.0f && ranks_ <= static_cast<int>(Optimizer::kMaxTerms)) apply_sum = step_piece;
  if (ranks_ > 1) {
    const double t0 = now_seconds();
    const Algorithm a =
        allreduce_apply(*dp_, grads.data() + s.begin, p, counts, apply, {}, window_, params_shared, apply_sum);
    if (inst_) inst_->blocking("zero.allreduce_apply", t0, now_seconds(), s.len * 4, coll_bytes(s.len * 4));
    comm_.add("reduce_scatter", s.len * 4, ranks_);
    comm_.add("allgather", s.len * 4, ranks_);
    return a;
  }
  if (s.len) {
    Instrument::Scope step(inst_, "optimizer", SpanKind::kCompute);
    std::vector<float> g(grads.data() + s.begin, grads.data() + s.begin + s.len);
    apply(0, g.data(), g.size());
  }
  return Algorithm::kNaive;
}

void ZeroOptimizer::reduce(int bucket, std::span<float> grads) {
  const Slice& s = buckets_[static_cast<size_t>(bucket)];
  float* g = grads.data() + s.begin;
  const float inv = average_ ? 1.0f / static_cast<float>(ranks_) : 1.0f;
  if (stage_ == 0) {
    if (ranks_ > 1) {
      const double t0 = now_seconds();
      allreduce(*dp_, g, static_cast<size_t>(s.len), DType::kFloat32, average_ ? ReduceOp::kAvg : ReduceOp::kSum);
      if (inst_) inst_->blocking("dp.allreduce", t0, now_seconds(), s.len * 4, coll_bytes(s.len * 4));
      comm_.add("allreduce", s.len * 4, ranks_);
    }
    return;
  }
  // Reduce-scatter: this rank receives the summed gradient of its slice only. Stage 1 keeps
  // it also in its place in the (full, unsharded) gradient buffer; stage 2 only in the shard
  // buffer (the full one is the caller's scratch).
  const int64_t per = (s.len + ranks_ - 1) / ranks_;
  padded_.assign(static_cast<size_t>(per * ranks_), 0.0f);
  copy_elements(padded_.data(), g, static_cast<size_t>(s.len));
  recv_.resize(static_cast<size_t>(per));
  if (ranks_ > 1) {
    const double t0 = now_seconds();
    ReduceScatterOptions o;
    o.scratch_send = true;  // padded_ is this optimizer's own copy
    reduce_scatter(*dp_, padded_.data(), recv_.data(), static_cast<size_t>(per), DType::kFloat32, ReduceOp::kSum, o);
    if (inst_) inst_->blocking("zero.reduce_scatter", t0, now_seconds(), per * ranks_ * 4, coll_bytes(per * ranks_ * 4));
    comm_.add("reduce_scatter", per * ranks_ * 4, ranks_);
  } else {
    copy_elements(recv_.data(), padded_.data(), static_cast<size_t>(per));
  }
  for (int64_t i = 0; i < s.mine_len; ++i) {
    const float v = recv_[static_cast<size_t>(i)] * inv;
    shard_grad_[static_cast<size_t>(s.at + i)] = v;
    if (stage_ == 1) grads[static_cast<size_t>(s.mine + i)] = v;
  }
}

double ZeroOptimizer::finish(std::span<float> params, std::span<float> grads, float lr, const ClipOptions& clip) {
  if (fused_) {
    DT_CHECK(clip.max_norm == 0, InvalidArgument, "ZeroOptimizer: the fused step cannot clip (the norm is known only after every bucket)");
    opt_->end_step();
    return 0;
  }
  std::span<float> g = stage_ == 0 ? grads : std::span<float>(shard_grad_);
  const double t0 = now_seconds();
  double sq = 0, norm = 0;
  if (clip.max_norm > 0) {
    if (stage_ == 0) {
      sq = weighted_sumsq(grads, clip.norm_weight, 0);
    } else {
      for (const Slice& s : buckets_)
        sq += weighted_sumsq(g.subspan(static_cast<size_t>(s.at), static_cast<size_t>(s.mine_len)), clip.norm_weight, s.mine);
      if (ranks_ > 1) allreduce(*dp_, &sq, 1, DType::kFloat64, ReduceOp::kSum);
    }
    if (clip.extra_reduce) sq = clip.extra_reduce(sq);
    norm = std::sqrt(sq);
    clip_by_norm(g, norm, clip.max_norm);
  }
  opt_->set_lr(lr);
  if (stage_ == 0) {
    opt_->step(params, g);
    if (inst_) inst_->compute("optimizer", t0, now_seconds());
    return norm;
  }
  // Step the concatenation of this rank's slices, put them back, then all-gather every bucket.
  shard_param_.resize(static_cast<size_t>(len_));
  for (const Slice& s : buckets_)
    std::copy_n(params.data() + s.mine, s.mine_len, shard_param_.data() + s.at);
  opt_->step(shard_param_, g);
  if (inst_) inst_->compute("optimizer", t0, now_seconds());
  for (const Slice& s : buckets_) {
    std::copy_n(shard_param_.data() + s.at, s.mine_len, params.data() + s.mine);
    if (ranks_ == 1) continue;
    std::vector<size_t> counts;
    for (int r = 0; r < ranks_; ++r) counts.push_back(static_cast<size_t>(zero_shard(s.len, ranks_, r).second));
    const double t1 = now_seconds();
    allgatherv(*dp_, shard_param_.data() + s.at, params.data() + s.begin, counts, DType::kFloat32);
    if (inst_) inst_->blocking("zero.allgather", t1, now_seconds(), s.len * 4, coll_bytes(s.len * 4));
    comm_.add("allgather", s.len * 4, ranks_);
  }
  return norm;
}

double ZeroOptimizer::step(std::span<float> params, std::span<float> grads, float lr, const ClipOptions& clip) {
  DT_CHECK(static_cast<int64_t>(params.size()) == n_ && static_cast<int64_t>(grads.size()) == n_, InvalidArgument,
           "ZeroOptimizer: expected " << n_ << " parameters and gradients, got " << params.size() << " and " << grads.size());
  if (fused_) opt_->set_lr(lr);
  for (int b = 0; b < buckets(); ++b) reduce(b, grads, params);
  return finish(params, grads, lr, clip);
}

ZeroBytes ZeroOptimizer::bytes() const {
  ZeroBytes b;
  b.params = n_ * 4;
  b.grads = stage_ == 2 ? static_cast<int64_t>(shard_grad_.size()) * 4 : n_ * 4;  // stage 1: the full buffer
  b.optimizer = static_cast<int64_t>(opt_->save_state().size());
  return b;
}

}  // namespace dtrain
