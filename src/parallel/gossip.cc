#include "parallel/gossip.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "base/clock.h"
#include "base/copy.h"
#include "base/error.h"
#include "data/sampler.h"
#include "tensor/kernels.h"

namespace dtrain {
namespace {
constexpr uint32_t kGossipTag = 0x60551;
constexpr uint32_t kReadyTag = 0x60552;  // "my first receives of the epoch are posted"
constexpr char kReadyWord = 1;
}

std::vector<int> gossip_neighbors(const std::string& topology, int rank, int world) {
  DT_CHECK(world >= 1 && rank >= 0 && rank < world, InvalidArgument, "gossip: rank " << rank << " of " << world);
  std::set<int> n;
  auto add = [&](int r) {
    r = ((r % world) + world) % world;
    if (r != rank) n.insert(r);
  };
  if (topology == "ring") {
    add(rank - 1);
    add(rank + 1);
  } else if (topology == "exponential") {
    for (int d = 1; d < world; d *= 2) {
      add(rank + d);
      add(rank - d);
    }
  } else if (topology == "complete") {
    for (int r = 0; r < world; ++r) add(r);
  } else if (topology == "torus") {
    int a = 1;
    for (int d = 1; d * d <= world; ++d)
      if (world % d == 0) a = d;
    const int b = world / a, i = rank / b, j = rank % b;
    auto at = [&](int ii, int jj) { add(((ii + a) % a) * b + (jj + b) % b); };
    at(i - 1, j);
    at(i + 1, j);
    at(i, j - 1);
    at(i, j + 1);
  } else {
    DT_THROW(InvalidArgument, "unknown gossip topology '" << topology << "'; use ring, torus, exponential or complete");
  }
  return std::vector<int>(n.begin(), n.end());
}

Gossip::Gossip(TrainableModel& model, Optimizer& optimizer, Communicator& comm, const std::string& topology,
               Instrument* inst, bool window)
    : ModelStrategy(model, &optimizer),
      opt_(optimizer),
      comm_(comm),
      inst_(inst),
      neighbors_(gossip_neighbors(topology, comm.rank(), comm.size())),
      replica_(model.make_replica()),
      evaluator_(comm),
      grad_(static_cast<size_t>(model.num_params())),
      mean_(static_cast<size_t>(model.num_params())) {
  const auto n = static_cast<size_t>(model.num_params());
  if (window && !neighbors_.empty() && comm_.shm_context()) {
    window_ = std::make_unique<ShmWindow>(comm_, 2 * n * sizeof(float));  // collective
    window_counted_ = std::make_unique<CountedAsHeap>(static_cast<int64_t>(window_->bytes()));
    word_in_.assign(neighbors_.size(), 0);
  } else {
    inbox_.assign(2 * neighbors_.size(), std::vector<float>(n));
  }
  blocking_broadcast(comm_, inst_, "broadcast-params", model_.params().data(), model_.params().size(),
                     DType::kFloat32, 0);
}

std::vector<Request> Gossip::post_inboxes(int set) {
  const size_t bytes = static_cast<size_t>(model_.num_params()) * sizeof(float);
  const size_t deg = neighbors_.size();
  std::vector<Request> reqs;
  for (size_t k = 0; k < deg; ++k)
    reqs.push_back(comm_.irecv(neighbors_[k], inbox_[static_cast<size_t>(set) * deg + k].data(), bytes, kGossipTag));
  return reqs;
}

void Gossip::mix(std::vector<Request> reqs) {
  std::span<float> x = model_.params();
  const size_t bytes = x.size() * sizeof(float);
  const double t0 = now_seconds();
  // The epoch's first send waits for the neighbours' word that their receives are posted.
  for (Request& r : ready_) r.wait();
  ready_.clear();
  for (int peer : neighbors_) reqs.push_back(comm_.isend(peer, x.data(), bytes, kGossipTag));
  // The next step's receives go into the other set now, before this step's are waited for,
  // when run_epoch says there is a next step: a neighbour can be at most one step ahead (its
  // next mix needs this rank's next model), and messages of one tag from one peer match
  // receives in the order they were posted. (Posted once this step's had all arrived, a
  // neighbour's next model still came first at 4 and 8 ranks and was buffered.)
  if (steps_left_ > 1) ahead_ = post_inboxes(1 - set_);
  for (Request& r : reqs) r.wait();
  const double t1 = now_seconds();
  if (inst_) {
    inst_->blocking("gossip exchange", t0, t1, static_cast<int64_t>(bytes * neighbors_.size()),
                    "\"peers\":" + std::to_string(neighbors_.size()) + ",\"bytes\":" + std::to_string(bytes));
  }
  std::vector<const float*> theirs;
  const size_t base = static_cast<size_t>(set_) * neighbors_.size();
  for (size_t k = 0; k < neighbors_.size(); ++k) theirs.push_back(inbox_[base + k].data());
  average(x.data(), theirs, x.data());
  if (!ahead_.empty()) set_ = 1 - set_;
}

std::span<float> Gossip::working() {
  if (!window_) return model_.params();
  const size_t n = model_.params().size();
  return {reinterpret_cast<float*>(window_->mine()) + static_cast<size_t>(exchanges_ % 2) * n, n};
}

void Gossip::move_model(bool into_slot) {
  if (!window_) return;
  std::span<float> slot = working(), model = model_.params();
  if (into_slot) copy_memory(slot.data(), model.data(), model.size_bytes());
  else copy_memory(model.data(), slot.data(), model.size_bytes());
}

void Gossip::exchange_words(const char* what, int64_t recorded_bytes) {
  const size_t bytes = model_.params().size() * sizeof(float);
  const double t0 = now_seconds();
  // Posted, then sent (the transport orders a peer's words by tag, one after another).
  std::vector<Request> reqs;
  for (size_t k = 0; k < neighbors_.size(); ++k) reqs.push_back(comm_.irecv(neighbors_[k], &word_in_[k], 1, kGossipTag));
  for (int peer : neighbors_) reqs.push_back(comm_.isend(peer, &kReadyWord, 1, kGossipTag));
  for (Request& r : reqs) r.wait();
  const double t1 = now_seconds();
  if (inst_) {
    inst_->blocking(what, t0, t1, recorded_bytes,
                    "\"peers\":" + std::to_string(neighbors_.size()) + ",\"bytes\":" + std::to_string(bytes) +
                        ",\"through\":\"window\"");
  }
}

void Gossip::mix_window() {
  std::span<float> x = working();  // this exchange's slot: the step was taken in it
  const size_t n = x.size(), bytes = n * sizeof(float);
  const size_t slot = static_cast<size_t>(exchanges_ % 2) * bytes;
  // The words: each neighbour's says its model of this exchange is in its slot.
  exchange_words("gossip exchange", static_cast<int64_t>(bytes * neighbors_.size()));
  const int p = comm_.size(), me = comm_.rank();
  if (neighbors_.size() + 1 == static_cast<size_t>(p)) {
    // A complete graph (every graph at 2 ranks): every rank mixes the same members with the
    // same weight, so each computes 1/p of the elements and writes them into every rank's
    // next slot, and a second word says its part is in place. Same sums in the same order,
    // the same bits; a rank reads bytes (not p x bytes) and the next step fetches the other
    // ranks' parts from their caches. A copy of the loop on the two vCPUs of the 2-vCPU Xeon
    // (0.94 MB model, threads in lock-step): 175-185 us a mix whole, 76-82 us shared, the
    // step after it 10-18 us longer. Writing into the others' next slots is safe: nobody
    // reads a next slot before this exchange's second words (the mix reads this exchange's
    // slots), and its owner steps in it only after them.
    std::vector<const float*> members(static_cast<size_t>(p));
    std::vector<float*> outs(static_cast<size_t>(p));
    for (int q = 0; q < p; ++q) {
      members[q] = reinterpret_cast<const float*>(window_->of(q) + slot);
      outs[q] = reinterpret_cast<float*>(window_->of(q) + (bytes - slot));
    }
    // Parts of whole cache lines (16 floats), the last rank's taking the rest.
    const size_t part = n / static_cast<size_t>(p) / 16 * 16;
    const size_t lo = part * static_cast<size_t>(me), hi = me == p - 1 ? n : lo + part;
    {
      Instrument::Scope s(inst_, "mix", SpanKind::kCompute);
      constexpr size_t kPiece = 8192;  // 32 KiB: mixed into this rank's slot, copied from cache
      std::vector<const float*> at(static_cast<size_t>(p));
      for (size_t off = lo; off < hi; off += kPiece) {
        const size_t len = std::min(kPiece, hi - off);
        for (int q = 0; q < p; ++q) at[q] = members[q] + off;
        gossip_average(at, 1.0f / static_cast<float>(p), outs[me] + off, len, grad_.data());
        for (int q = 0; q < p; ++q)
          if (q != me) copy_memory(outs[q] + off, outs[me] + off, len * sizeof(float));
      }
    }
    exchange_words("gossip parts", 0);  // the models were counted as the exchange's
  } else {
    std::vector<const float*> theirs;
    for (int peer : neighbors_) theirs.push_back(reinterpret_cast<const float*>(window_->of(peer) + slot));
    // Into the other slot: the next exchange's, where the next step is taken.
    average(x.data(), theirs, reinterpret_cast<float*>(window_->mine() + (bytes - slot)));
  }
  ++exchanges_;
}

void Gossip::average(const float* x, const std::vector<const float*>& theirs, float* out) {
  const size_t n = model_.params().size();
  // x_i <- sum over members in rank order of W x_j, W = 1/(deg + 1).
  Instrument::Scope s(inst_, "mix", SpanKind::kCompute);
  const float w = 1.0f / static_cast<float>(neighbors_.size() + 1);
  std::vector<const float*> members;
  size_t k = 0;
  for (; k < neighbors_.size() && neighbors_[k] < comm_.rank(); ++k) members.push_back(theirs[k]);
  members.push_back(x);
  for (; k < neighbors_.size(); ++k) members.push_back(theirs[k]);
  gossip_average(members, w, out, n, grad_.data());  // grad_ is free scratch here
}

void gossip_average(const std::vector<const float*>& members, float w, float* out, size_t n, float* acc) {
  // Member by member over cache-sized blocks with the SIMD kernels (tensor/kernels.h): the
  // sum per element keeps the rank order m0 + m1 + ..., then one multiply by W. A loop over
  // the members per element compiled to scalar code and took 39-43% of an 8-rank step's CPU
  // (perf). When out is a member, each block is read in full before its results are
  // written back.
  const Kernels& kern = kernels();
  constexpr size_t kBlock = 4096;
  for (size_t off = 0; off < n; off += kBlock) {
    const auto len = static_cast<int64_t>(std::min(kBlock, n - off));
    kern.add(members[0] + off, members[1] + off, acc, len);
    for (size_t j = 2; j < members.size(); ++j) kern.add(acc, members[j] + off, acc, len);
    kern.scale(w, acc, out + off, len);
  }
}

LossAcc Gossip::step(std::span<const int64_t> global_batch) {
  // One step alone: on the window path the model goes into its slot and back around it
  // (run_epoch moves it once an epoch instead).
  move_model(true);
  LossAcc r = train_step(global_batch);
  move_model(false);
  return r;
}

LossAcc Gossip::train_step(std::span<const int64_t> global_batch) {
  const auto [lo, hi] = data::batch_share(static_cast<int64_t>(global_batch.size()), comm_.rank(), comm_.size());
  std::span<const int64_t> mine = global_batch.subspan(static_cast<size_t>(lo), static_cast<size_t>(hi - lo));
  // The inboxes are posted before the local step (within an epoch, by the previous step's
  // exchange, into the other set), so a neighbour that finishes its step first sends
  // straight into them. Posted only when this step's mix began, a neighbour a
  // whole step ahead (ranks drift apart when they outnumber the cores) found none, and the
  // transport buffered its model on the heap and copied it again: one such buffer per
  // neighbour at 4 and 8 ranks (traced), now and then at 2.
  std::vector<Request> inboxes;
  if (!window_) inboxes = ahead_.empty() ? post_inboxes(set_) : std::move(ahead_);
  ahead_.clear();
  LossAcc r;
  {
    Instrument::Scope s(inst_, "local step", SpanKind::kCompute);
    std::span<float> x = working();
    r = replica_->loss_grad(x, mine, grad_);
    if (!mine.empty()) opt_.step(x, grad_);
  }
  if (window_) mix_window();
  else if (!neighbors_.empty()) mix(std::move(inboxes));
  if (steps_left_ > 0) --steps_left_;
  have_mean_ = false;
  return r;
}

LossAcc Gossip::run_epoch(std::span<const int64_t> order, int64_t batch, const ProgressFn& progress) {
  // run_minibatches calls step() once per batch: ceil(n / batch) times.
  steps_left_ = batch >= 1 ? (static_cast<int64_t>(order.size()) + batch - 1) / batch : 0;
  // The epoch's first receives are posted here and each neighbour is told so; the first send
  // waits for the neighbours' word (mix). A neighbour that started the epoch first otherwise
  // sent its model before this rank had posted anything, and the transport buffered it: the
  // heap at the round's start held 0-2 extra models by timing (10.0-11.0 MB at 4 ranks).
  if (steps_left_ > 0 && !neighbors_.empty() && !window_) {
    if (ahead_.empty()) ahead_ = post_inboxes(set_);
    ready_in_.assign(neighbors_.size(), 0);  // no ready word is pending: the last epoch's first mix took them
    for (size_t k = 0; k < neighbors_.size(); ++k) {
      ready_.push_back(comm_.irecv(neighbors_[k], &ready_in_[k], 1, kReadyTag));
      ready_.push_back(comm_.isend(neighbors_[k], &kReadyWord, 1, kReadyTag));
    }
  }
  // The window path trains the model in its slot (working()): in at the start, out at the
  // end, where the metrics, the evaluation and the checkpoints read it. (Writing the slot
  // now is safe: the neighbours finished reading it before their words of the last exchange.)
  move_model(true);
  LossAcc local =
      run_minibatches(order, batch, progress, [&](std::span<const int64_t> ids) { return train_step(ids); });
  move_model(false);
  if (local.examples) local.loss /= static_cast<double>(local.examples);
  return sum_stats(comm_, local);
}

Metrics Gossip::epoch_metrics() {
  const double d = consensus_distance(comm_, nullptr, model_.params(), mean_);
  have_mean_ = true;
  return {{"consensus_distance", d}};
}

LossAcc Gossip::evaluate_on(TrainableModel& model, const data::Dataset& ds, ThreadPool* pool) {
  if (!have_mean_) epoch_metrics();
  // Score the average model, then put this rank's own model back.
  std::span<float> x = model.params();
  std::vector<float> mine(x.begin(), x.end());
  std::copy(mean_.begin(), mean_.end(), x.begin());
  LossAcc r = evaluator_.evaluate(model, ds, pool);
  std::copy(mine.begin(), mine.end(), x.begin());
  return r;
}

}  // namespace dtrain
