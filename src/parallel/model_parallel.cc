// parallel/model_parallel.cc — GptTrainer: mesh, partition, chunks, step, evaluation, stats.
#include "parallel/model_parallel.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "autograd/ops.h"
#include "base/clock.h"
#include "base/error.h"
#include "coll/collectives.h"
#include "parallel/zero3.h"
#include "tensor/random.h"

namespace dtrain {

// This rank's V chunks as the executor's PipelineModel; micro-batch data set per step.
class GptTrainer::Chunks : public PipelineModel {
 public:
  std::vector<std::unique_ptr<GptStage>> stages;
  TensorParallelHooks* hooks = nullptr;
  std::vector<std::vector<int32_t>> x, y;  // per micro-batch
  int64_t seqs = 0, context = 0, width = 0;
  std::vector<std::span<const float>> buffers;

  Var forward(Graph& g, int chunk, int micro, const Var& input) override {
    return stages[static_cast<size_t>(chunk)]->forward_stage(g, input, x[static_cast<size_t>(micro)],
                                                             y[static_cast<size_t>(micro)], seqs, context, hooks);
  }
  int units(int chunk) const override {
    const GptStage& s = *stages[static_cast<size_t>(chunk)];
    return s.unit_end() - s.unit_begin();
  }
  Var forward_unit(Graph& g, int chunk, int micro, int unit, const Var& input) override {
    GptStage& s = *stages[static_cast<size_t>(chunk)];
    const int u = s.unit_begin() + unit;
    return s.forward_units(g, input, x[static_cast<size_t>(micro)], y[static_cast<size_t>(micro)], seqs, context, hooks,
                           u, u + 1);
  }
  Shape activation_shape(int) const override { return {seqs * context, width}; }
  std::vector<std::span<const float>> param_buffers() const override { return buffers; }
};

void GptTrainer::sample_batch(const std::vector<int32_t>& ids, int64_t begin, int64_t end, uint64_t seed, int64_t key,
                              int64_t first, int64_t count, int64_t context, std::vector<int32_t>& x,
                              std::vector<int32_t>& y) {
  const int64_t range = end - begin - context - 1;
  DT_CHECK(range > 0, InvalidArgument,
           "text split of " << end - begin << " characters is too short for context " << context);
  x.resize(static_cast<size_t>(count * context));
  y.resize(x.size());
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t h = splitmix64(derive_seed(seed, static_cast<uint64_t>(key) * 1000003ull + static_cast<uint64_t>(first + i)));
    const int64_t start = begin + static_cast<int64_t>(h % static_cast<uint64_t>(range));
    for (int64_t t = 0; t < context; ++t) {
      x[static_cast<size_t>(i * context + t)] = ids[static_cast<size_t>(start + t)];
      y[static_cast<size_t>(i * context + t)] = ids[static_cast<size_t>(start + t + 1)];
    }
  }
}

GptTrainer::GptTrainer(Communicator& world, const MpConfig& config, const data::TextData& text, Instrument* instrument)
    : world_(world), cfg_(config), text_(text), instrument_(instrument) {
  const MeshShape& m = cfg_.mesh;
  DT_CHECK(cfg_.micro >= 1 && cfg_.batch % (static_cast<int64_t>(m.dp) * cfg_.micro) == 0, InvalidArgument,
           "--batch " << cfg_.batch << " must be divisible by dp " << m.dp << " x microbatches " << cfg_.micro);
  DT_CHECK(cfg_.zero >= 0 && cfg_.zero <= 3, InvalidArgument, "--zero must be 0, 1, 2 or 3, got " << cfg_.zero);
  DT_CHECK(cfg_.zero < 3 || (m.tp == 1 && m.pp == 1), InvalidArgument,
           "--zero 3 shards every parameter over the data-parallel ranks; use it with tp = pp = 1 (zero 1/2 combine with tp/pp)");
  mesh_ = std::make_unique<Mesh>(world, m);
  train_end_ = static_cast<int64_t>(static_cast<double>(text.ids.size()) * 0.9);
  if (cfg_.zero == 3) {
    GptStage dense(cfg_.model, 0, cfg_.model.num_units());
    dense.allocate(0);
    dense.init_gpt(cfg_.seed);
    zero3_ = std::make_unique<Zero3Gpt>(&mesh_->dp(), cfg_.model, dense, cfg_.optimizer, instrument_);
    return;
  }
  build_model_parallel();
}

GptTrainer::~GptTrainer() = default;

std::vector<double> gpt_flops_costs(const GptConfig& c) {
  std::vector<double> costs(static_cast<size_t>(c.num_units()));
  const double w = static_cast<double>(c.width), t = static_cast<double>(c.context);
  costs.front() = 2 * w;  // two lookups and an add
  for (int u = 1; u + 1 < c.num_units(); ++u) costs[static_cast<size_t>(u)] = 3 * (12 * w * w + 2 * t * w);
  costs.back() = 3 * w * static_cast<double>(c.vocab) + 10 * w;
  return costs;
}

// Forward + backward multiply-adds per token of each unit ("flops"), or each unit's
// forward + backward CPU time on one micro-batch ("measured"): the cost model for balancing.
std::vector<double> GptTrainer::unit_costs() {
  const GptConfig& c = cfg_.model;
  std::vector<double> costs(static_cast<size_t>(c.num_units()));
  if (cfg_.balance == "flops") return gpt_flops_costs(c);
  DT_CHECK(cfg_.balance == "measured", InvalidArgument, "--balance must be flops or measured, got " << cfg_.balance);
  // Rank 0 times each unit's forward + backward on one micro-batch (thread CPU time, best of
  // 5, so a loaded machine does not skew it); everyone gets rank 0's numbers.
  if (world_.rank() == 0) {
    const int64_t seqs = cfg_.batch / (cfg_.mesh.dp * cfg_.micro);
    std::vector<int32_t> x, y;
    sample_batch(text_.ids, 0, train_end_, cfg_.seed, -1, 0, seqs, c.context, x, y);
    Tensor act;
    for (int u = 0; u < c.num_units(); ++u) {
      GptStage s(c, u, u + 1);
      s.allocate(0);
      s.init_gpt(cfg_.seed);
      double best = 1e30;
      Tensor out;
      for (int rep = 0; rep < 5; ++rep) {
        const double t0 = thread_cpu_seconds();
        Graph g;
        Var in = act.defined() ? g.leaf(act) : Var();
        Var o = s.forward_stage(g, in, x, y, seqs, c.context);
        if (o.value().numel() == 1) g.backward(o);
        else g.backward(o, Tensor::full(o.value().shape(), 1e-3f));
        best = std::min(best, thread_cpu_seconds() - t0);
        out = o.value();
      }
      costs[static_cast<size_t>(u)] = best;
      act = out;
    }
  }
  broadcast(world_, costs.data(), costs.size(), DType::kFloat64, 0);
  return costs;
}

void GptTrainer::build_model_parallel() {
  const MeshShape& m = cfg_.mesh;
  const GptConfig& c = cfg_.model;
  tp_ = std::make_unique<TpGroup>(&mesh_->tp(), instrument_);
  hooks_ = std::make_unique<TpHooks>(*tp_);
  schedule_ = make_schedule(cfg_.schedule, m.pp, cfg_.micro, cfg_.virtual_stages);
  DT_CHECK(check_schedule(schedule_).empty(), InvalidArgument, "pipeline schedule failed its check: " << check_schedule(schedule_));
  bounds_ = balanced_partition(unit_costs(), m.pp * cfg_.virtual_stages);
  chunks_ = std::make_unique<Chunks>();
  chunks_->hooks = hooks_.get();
  chunks_->seqs = cfg_.batch / (m.dp * cfg_.micro);
  chunks_->context = c.context;
  chunks_->width = c.width;
  int64_t n = 0;
  for (int ch = 0; ch < cfg_.virtual_stages; ++ch) {
    const int piece = schedule_.piece(mesh_->pp_rank(), ch);
    chunks_->stages.push_back(std::make_unique<GptStage>(c, bounds_[static_cast<size_t>(piece)],
                                                         bounds_[static_cast<size_t>(piece + 1)], m.tp));
    n += chunks_->stages.back()->num_params();
  }
  // One flat buffer per rank; every chunk a contiguous slice of it.
  params_.assign(static_cast<size_t>(n), 0.0f);
  grads_.assign(static_cast<size_t>(n), 0.0f);
  GptStage dense(c, 0, c.num_units());
  dense.allocate(0);
  dense.init_gpt(cfg_.seed);
  if (m.tp > 1) clip_.norm_weight.assign(static_cast<size_t>(n), 1.0f);
  int64_t off = 0;
  for (auto& st : chunks_->stages) {
    const int64_t k = st->num_params();
    st->bind(std::span<float>(params_.data() + off, static_cast<size_t>(k)), std::span<float>(grads_.data() + off, static_cast<size_t>(k)));
    st->set_grad_mode(GradMode::kAccumulate);
    shard_gpt_from_dense(dense, *st, mesh_->tp_rank());
    if (m.tp > 1)
      for (Parameter* p : st->parameters())
        if (tp_split(p->name) == TpSplit::kReplicated)
          std::fill_n(clip_.norm_weight.begin() + off + p->offset, p->numel, 1.0f / static_cast<float>(m.tp));
    off += k;
  }
  chunks_->buffers = {std::span<const float>(params_)};
  zopt_ = std::make_unique<ZeroOptimizer>(&mesh_->dp(), cfg_.zero, n, cfg_.optimizer);
  zopt_->set_instrument(instrument_);
  if (cfg_.zero == 2) bind_grads(false);
  clip_.max_norm = cfg_.clip;
  clip_.extra_reduce = [this](double sq) {
    if (mesh_->tp().size() > 1) allreduce(mesh_->tp(), &sq, 1, DType::kFloat64, ReduceOp::kSum);
    if (mesh_->pp().size() > 1) allreduce(mesh_->pp(), &sq, 1, DType::kFloat64, ReduceOp::kSum);
    return sq;
  };
}

// Points every chunk at its slice of params_ and grads_; with allocate false the gradient
// buffer is released (ZeRO-2 between steps: the chunks' gradient views are not used until
// the next bind_grads(true)).
void GptTrainer::bind_grads(bool allocate) {
  if (!allocate) {
    std::vector<float>().swap(grads_);
    return;
  }
  grads_.assign(params_.size(), 0.0f);
  int64_t off = 0;
  for (auto& st : chunks_->stages) {
    const int64_t k = st->num_params();
    st->bind(std::span<float>(params_.data() + off, static_cast<size_t>(k)), std::span<float>(grads_.data() + off, static_cast<size_t>(k)));
    off += k;
  }
}

// Sum of `local` over the ranks that contribute, divided by divide_by (the same on all ranks).
float GptTrainer::global_mean(double local, bool contributes, Communicator& over, int divide_by) {
  double v = contributes ? local : 0.0;
  if (over.size() > 1) allreduce(over, &v, 1, DType::kFloat64, ReduceOp::kSum);
  return static_cast<float>(v / divide_by);
}

float GptTrainer::step() {
  const MeshShape& m = cfg_.mesh;
  const float lr = cfg_.lr.at(step_);
  const int64_t local = cfg_.batch / m.dp;
  const int d = mesh_->dp_rank();
  float loss = 0;
  if (zero3_) {
    std::vector<int32_t> x, y;
    sample_batch(text_.ids, 0, train_end_, cfg_.seed, step_, d * local, local, cfg_.model.context, x, y);
    const float l = zero3_->step(x, y, local, cfg_.model.context, lr, cfg_.clip);
    loss = global_mean(l, true, world_, m.dp);
    ++step_;
    return loss;
  }
  Chunks& ch = *chunks_;
  ch.x.assign(static_cast<size_t>(cfg_.micro), {});
  ch.y.assign(static_cast<size_t>(cfg_.micro), {});
  for (int mb = 0; mb < cfg_.micro; ++mb)
    sample_batch(text_.ids, 0, train_end_, cfg_.seed, step_, d * local + mb * ch.seqs, ch.seqs, cfg_.model.context,
                 ch.x[static_cast<size_t>(mb)], ch.y[static_cast<size_t>(mb)]);
  // ZeRO-2 keeps no full gradient buffer between steps: allocate it for this step's backward.
  if (cfg_.zero == 2) bind_grads(true);
  std::fill(grads_.begin(), grads_.end(), 0.0f);
  PipelineOptions po;
  po.recompute = cfg_.recompute;
  po.instrument = instrument_;
  po.step = step_;
  // The optimizer records its own spans: the data-parallel collectives and the step.
  PipelineStats st = run_pipeline(&mesh_->pp(), schedule_, ch, po, [&] { zopt_->step(params_, grads_, lr, clip_); });
  if (cfg_.zero == 2) bind_grads(false);
  max_in_flight_ = std::max(max_in_flight_, st.max_in_flight);
  peak_act_ = std::max(peak_act_, st.peak_activation_bytes);
  timelines_.push_back(std::move(st.timeline));
  if (timelines_.size() > 32) timelines_.erase(timelines_.begin());
  const bool last_stage = schedule_.stage_of(schedule_.pieces() - 1) == mesh_->pp_rank();
  loss = global_mean(st.losses ? st.loss_sum / st.losses : 0.0, last_stage && mesh_->tp_rank() == 0, world_, m.dp);
  ++step_;
  return loss;
}

// Forward only, piece by piece: the rank holding piece k receives from piece k-1's rank,
// runs its chunk on a graph that records nothing, and sends on.
float GptTrainer::eval_pipeline(const std::vector<int32_t>& x, const std::vector<int32_t>& y, int64_t seqs) {
  const int P = cfg_.mesh.pp, me = mesh_->pp_rank();
  Tensor act;
  float loss = 0;
  std::vector<std::pair<Tensor, Request>> sends;
  for (int k = 0; k < schedule_.pieces(); ++k) {
    if (schedule_.stage_of(k) != me) continue;
    const uint32_t tag = (1u << 31) | (static_cast<uint32_t>(k) << 16);
    if (k > 0 && P > 1) {
      act = Tensor::empty({seqs * cfg_.model.context, cfg_.model.width});
      mesh_->pp().recv(schedule_.stage_of(k - 1), act.data(), static_cast<size_t>(act.numel()) * 4, tag);
    }
    Graph g(nullptr, false);
    Var out = chunks_->stages[static_cast<size_t>(schedule_.chunk_of(k))]->forward_stage(
        g, act.defined() ? g.input(act) : Var(), x, y, seqs, cfg_.model.context, hooks_.get());
    act = out.value().contiguous();
    if (k == schedule_.pieces() - 1) loss = act.item();
    else if (P > 1) {
      const uint32_t next = (1u << 31) | (static_cast<uint32_t>(k + 1) << 16);
      sends.push_back({act, mesh_->pp().isend(schedule_.stage_of(k + 1), act.data(), static_cast<size_t>(act.numel()) * 4, next)});
    }
  }
  for (auto& [t, r] : sends) r.wait();
  return loss;
}

float GptTrainer::evaluate() {
  const MeshShape& m = cfg_.mesh;
  const int64_t local = cfg_.batch / m.dp;
  const int64_t n = static_cast<int64_t>(text_.ids.size());
  double sum = 0;
  for (int64_t b = 0; b < cfg_.eval_batches; ++b) {
    std::vector<int32_t> x, y;
    sample_batch(text_.ids, train_end_, n, cfg_.seed + 1, b, mesh_->dp_rank() * local, local, cfg_.model.context, x, y);
    if (zero3_) {
      sum += global_mean(zero3_->evaluate(x, y, local, cfg_.model.context), true, world_, m.dp);
    } else {
      const float l = eval_pipeline(x, y, local);
      const bool last_stage = schedule_.stage_of(schedule_.pieces() - 1) == mesh_->pp_rank();
      sum += global_mean(l, last_stage && mesh_->tp_rank() == 0, world_, m.dp);
    }
  }
  return static_cast<float>(sum / static_cast<double>(std::max<int64_t>(cfg_.eval_batches, 1)));
}

std::span<float> GptTrainer::local_params() { return zero3_ ? zero3_->shard_params() : std::span<float>(params_); }

Optimizer& GptTrainer::local_optimizer() { return zero3_ ? zero3_->optimizer() : zopt_->optimizer(); }

void GptTrainer::gather_dense(GptStage& out) {
  if (zero3_) {
    zero3_->gather_dense(out);
    return;
  }
  // Data-parallel rank 0 of every (stage, TP shard) writes its pieces; replicated parameters
  // only from TP rank 0; one sum over the world assembles the whole model everywhere.
  std::span<float> dst = out.param_span();
  std::fill(dst.begin(), dst.end(), 0.0f);
  if (mesh_->dp_rank() == 0)
    for (auto& st : chunks_->stages) place_gpt_shard(out, *st, mesh_->tp_rank(), false, mesh_->tp_rank() == 0);
  if (world_.size() > 1) allreduce(world_, dst.data(), dst.size(), DType::kFloat32, ReduceOp::kSum);
}

MpStats GptTrainer::stats() {
  MpStats s;
  s.bounds = bounds_;
  s.model_params = gpt_num_params(cfg_.model);
  if (zero3_) {
    s.bytes = zero3_->bytes();
    s.zero_comm = zero3_->comm();
    s.local_params = s.bytes.params / 4;
    return s;
  }
  s.bytes = zopt_->bytes();
  s.zero_comm = zopt_->comm();
  s.tp = tp_->counts();
  s.local_params = static_cast<int64_t>(params_.size());
  Communicator& pp = mesh_->pp();
  const int P = pp.size();
  // Per-stage memory numbers.
  std::vector<int64_t> mine = {max_in_flight_, peak_act_}, all(static_cast<size_t>(2 * P));
  if (P > 1) allgather(pp, mine.data(), all.data(), 2, DType::kInt64);
  else all = mine;
  for (int q = 0; q < P; ++q) {
    s.max_in_flight.push_back(static_cast<int>(all[static_cast<size_t>(2 * q)]));
    s.peak_activation_bytes.push_back(all[static_cast<size_t>(2 * q + 1)]);
  }
  // Bubble per recorded step (the first step of the run is left out: warm-up).
  s.bubble_formula = bubble_formula(cfg_.schedule, P, cfg_.micro, cfg_.virtual_stages);
  const size_t first = (step_ == static_cast<int64_t>(timelines_.size()) && timelines_.size() > 1) ? 1 : 0;
  double meas = 0, rep = 0, med = 0;
  for (size_t i = first; i < timelines_.size(); ++i) {
    std::vector<double> flat;
    for (const InstrTiming& t : timelines_[i])
      flat.insert(flat.end(), {static_cast<double>(t.instr.op), static_cast<double>(t.instr.micro),
                               static_cast<double>(t.instr.chunk), t.t0, t.t1, t.cpu});
    std::vector<size_t> counts(static_cast<size_t>(P));
    const size_t my = flat.size();
    std::vector<int64_t> cnt_all(static_cast<size_t>(P));
    const int64_t c64 = static_cast<int64_t>(my);
    if (P > 1) allgather(pp, &c64, cnt_all.data(), 1, DType::kInt64);
    else cnt_all[0] = c64;
    size_t total = 0;
    for (int q = 0; q < P; ++q) total += (counts[static_cast<size_t>(q)] = static_cast<size_t>(cnt_all[static_cast<size_t>(q)]));
    std::vector<double> every(total);
    if (P > 1) allgatherv(pp, flat.data(), every.data(), counts, DType::kFloat64);
    else every = flat;
    std::vector<std::vector<InstrTiming>> tls(static_cast<size_t>(P));
    size_t pos = 0;
    for (int q = 0; q < P; ++q)
      for (size_t j = 0; j < counts[static_cast<size_t>(q)]; j += 6, pos += 6)
        tls[static_cast<size_t>(q)].push_back({PipeInstr{static_cast<PipeOp>(static_cast<int>(every[pos])),
                                                         static_cast<int>(every[pos + 1]), static_cast<int>(every[pos + 2])},
                                               every[pos + 3], every[pos + 4], every[pos + 5]});
    meas += measured_bubble(tls);
    rep += replayed_bubble(schedule_, tls);
    med += replayed_bubble(schedule_, tls, true);
    ++s.steps_timed;
  }
  if (s.steps_timed > 0) {
    s.bubble_measured = meas / s.steps_timed;
    s.bubble_replayed = rep / s.steps_timed;
    s.bubble_replayed_median = med / s.steps_timed;
  }
  return s;
}

}  // namespace dtrain
