// parallel/zero3.cc — ZeRO-3 for the GPT (see zero3.h for the algorithm).
//
// Layout: unit u has n_u parameters and per_u = ceil(n_u / N) slots per rank; rank r stores
// elements [r per_u, (r + 1) per_u) of the unit (zeros past n_u), at offset soff_u of its
// shard buffers. So gathering a unit is one all-gather of per_u floats per rank, and its
// gradient shard one reduce-scatter of the zero-padded N per_u gradient buffer.
#include "parallel/zero3.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/error.h"
#include "coll/collectives.h"
#include "optim/clip.h"

namespace dtrain {

struct Zero3Gpt::Unit {
  int index = 0;
  std::unique_ptr<GptStage> module;
  int64_t n = 0, per = 0, soff = 0;
};

Zero3Gpt::Zero3Gpt(Communicator* dp, const GptConfig& config, const GptStage& init, const OptimizerConfig& optimizer,
                   Instrument* instrument)
    : dp_(dp), ranks_(dp ? dp->size() : 1), rank_(dp ? dp->rank() : 0), config_(config), instrument_(instrument) {
  DT_CHECK(init.unit_begin() == 0 && init.unit_end() == config.num_units() && init.tp_size() == 1, InvalidArgument,
           "Zero3Gpt: the initial model must be the whole dense GPT");
  int64_t soff = 0;
  for (int u = 0; u < config.num_units(); ++u) {
    auto unit = std::make_unique<Unit>();
    unit->index = u;
    unit->module = std::make_unique<GptStage>(config, u, u + 1);
    unit->n = unit->module->num_params();
    unit->per = (unit->n + ranks_ - 1) / ranks_;
    unit->soff = soff;
    soff += unit->per;
    n_total_ += unit->n;
    peak_unit_bytes_ = std::max(peak_unit_bytes_, (unit->per * ranks_ + unit->n) * 4);
    units_.push_back(std::move(unit));
  }
  shard_params_.assign(static_cast<size_t>(soff), 0.0f);
  shard_grads_.assign(static_cast<size_t>(soff), 0.0f);
  std::span<const float> all = const_cast<GptStage&>(init).param_span();
  for (auto& u : units_) {
    const int64_t base = init.unit_offset(u->index);
    for (int64_t i = 0; i < u->per; ++i) {
      const int64_t e = rank_ * u->per + i;
      if (e < u->n) shard_params_[static_cast<size_t>(u->soff + i)] = all[static_cast<size_t>(base + e)];
    }
  }
  opt_ = make_optimizer(optimizer, soff);
}

Zero3Gpt::~Zero3Gpt() = default;

void Zero3Gpt::compute_span(const std::string& name, double t0) {
  if (instrument_) instrument_->compute(name, t0, now_seconds());
}

void Zero3Gpt::comm_span(const char* name, double t0, int64_t bytes) {
  if (instrument_) instrument_->blocking(name, t0, now_seconds(), bytes, "\"bytes\":" + std::to_string(bytes));
}

void Zero3Gpt::gather(Unit& u, std::vector<float>& full, bool count) {
  full.assign(static_cast<size_t>(u.per * ranks_), 0.0f);
  const float* mine = shard_params_.data() + u.soff;
  if (ranks_ > 1) {
    const double t0 = now_seconds();
    allgather(*dp_, mine, full.data(), static_cast<size_t>(u.per), DType::kFloat32);
    if (count) comm_.add("allgather", u.per * ranks_ * 4, ranks_);
    if (count) comm_span("zero3.allgather", t0, u.per * ranks_ * 4);
  } else {
    std::copy_n(mine, u.per, full.data());
  }
}

void Zero3Gpt::reduce_grads(Unit& u, std::vector<float>& g) {
  g.resize(static_cast<size_t>(u.per * ranks_), 0.0f);  // zero padding past n
  float* mine = shard_grads_.data() + u.soff;
  if (ranks_ > 1) {
    const double t0 = now_seconds();
    ReduceScatterOptions o;
    o.scratch_send = true;  // g is the unit's gradient scratch, assigned afresh for the next unit
    reduce_scatter(*dp_, g.data(), mine, static_cast<size_t>(u.per), DType::kFloat32, ReduceOp::kSum, o);
    comm_.add("reduce_scatter", u.per * ranks_ * 4, ranks_);
    comm_span("zero3.reduce_scatter", t0, u.per * ranks_ * 4);
  } else {
    std::copy_n(g.data(), u.per, mine);
  }
  const float inv = 1.0f / static_cast<float>(ranks_);
  for (int64_t i = 0; i < u.per; ++i) mine[i] *= inv;
}

float Zero3Gpt::step(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t batch, int64_t seq,
                     float lr, float clip_norm) {
  const size_t last = units_.size() - 1;
  std::vector<float> full, grads;
  std::vector<Tensor> inputs(units_.size());
  Tensor x;
  // Forward through all units but the head, keeping only each unit's input.
  for (size_t i = 0; i < last; ++i) {
    Unit& u = *units_[i];
    gather(u, full);
    const double t0 = now_seconds();
    grads.assign(static_cast<size_t>(u.n), 0.0f);
    u.module->bind(std::span<float>(full.data(), static_cast<size_t>(u.n)), std::span<float>(grads));
    Graph g(nullptr, false);
    inputs[i] = x;
    x = u.module->forward_stage(g, x.defined() ? g.input(x) : Var(), tokens, targets, batch, seq).value();
    compute_span("F" + std::to_string(i), t0);
  }
  // The head: forward and backward at once.
  Tensor dx;
  float loss = 0;
  {
    Unit& u = *units_[last];
    gather(u, full);
    const double t0 = now_seconds();
    grads.assign(static_cast<size_t>(u.n), 0.0f);
    u.module->bind(std::span<float>(full.data(), static_cast<size_t>(u.n)), std::span<float>(grads));
    Graph g;
    Var in = g.leaf(x);
    Var l = u.module->forward_stage(g, in, tokens, targets, batch, seq);
    g.backward(l);
    loss = l.item();
    dx = in.grad().clone();
    compute_span("head", t0);
    reduce_grads(u, grads);
  }
  // Backward, unit by unit from the last block down.
  for (size_t i = last; i-- > 0;) {
    Unit& u = *units_[i];
    gather(u, full);
    const double t0 = now_seconds();
    grads.assign(static_cast<size_t>(u.n), 0.0f);
    u.module->bind(std::span<float>(full.data(), static_cast<size_t>(u.n)), std::span<float>(grads));
    Graph g;
    Var in = inputs[i].defined() ? g.leaf(inputs[i]) : Var();
    Var out = u.module->forward_stage(g, in, tokens, targets, batch, seq);
    g.backward(out, dx);
    if (in.defined()) dx = in.grad().clone();
    compute_span("B" + std::to_string(i), t0);
    reduce_grads(u, grads);
  }
  // Free the gathered buffers before the step: only shards stay.
  std::vector<float>().swap(full);
  std::vector<float>().swap(grads);
  const double t_opt = now_seconds();
  if (clip_norm > 0) {
    double sq = grad_sumsq(shard_grads_);
    if (ranks_ > 1) allreduce(*dp_, &sq, 1, DType::kFloat64, ReduceOp::kSum);
    clip_by_norm(shard_grads_, std::sqrt(sq), clip_norm);
  }
  opt_->set_lr(lr);
  opt_->step(shard_params_, shard_grads_);
  compute_span("optimizer", t_opt);
  return loss;
}

float Zero3Gpt::evaluate(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t batch, int64_t seq) {
  std::vector<float> full, grads;
  Tensor x;
  for (auto& up : units_) {
    Unit& u = *up;
    gather(u, full, false);
    grads.assign(static_cast<size_t>(u.n), 0.0f);
    u.module->bind(std::span<float>(full.data(), static_cast<size_t>(u.n)), std::span<float>(grads));
    Graph g(nullptr, false);
    x = u.module->forward_stage(g, x.defined() ? g.input(x) : Var(), tokens, targets, batch, seq).value();
  }
  return x.item();
}

void Zero3Gpt::gather_dense(GptStage& out) {
  DT_CHECK(out.unit_begin() == 0 && out.unit_end() == config_.num_units() && out.tp_size() == 1, InvalidArgument,
           "Zero3Gpt::gather_dense: the target must be the whole dense GPT");
  std::vector<float> full;
  std::span<float> dst = out.param_span();
  for (auto& u : units_) {
    gather(*u, full, false);
    std::copy_n(full.data(), u->n, dst.data() + out.unit_offset(u->index));
  }
}

ZeroBytes Zero3Gpt::bytes() const {
  ZeroBytes b;
  b.params = static_cast<int64_t>(shard_params_.size()) * 4;
  b.grads = static_cast<int64_t>(shard_grads_.size()) * 4;
  b.optimizer = static_cast<int64_t>(opt_->save_state().size());
  return b;
}

}  // namespace dtrain
