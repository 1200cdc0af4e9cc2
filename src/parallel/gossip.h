// parallel/gossip.h — decentralized parallel SGD (D-PSGD, Lian et al. 2017): no server and
// no global all-reduce; each rank averages its model with its neighbours in a sparse graph.
//
// Algorithm ("adapt then combine"). Rank i keeps its own model x_i and optimizer state. At
// step t every rank takes its share of the same global minibatch as ddp, applies its
// optimizer to its own gradient (x_i' = x_i - lr * update_i), then exchanges x_i' with its
// neighbours N(i) by point-to-point sends and receives and mixes
//     x_i <- sum_{j in N(i) + {i}} W_ij x_j',     W_ij = 1 / (|N(i)| + 1).
// Every topology here is a regular, undirected graph (a circulant or a torus), so the
// uniform W is symmetric with rows and columns summing to 1: doubly stochastic, which keeps
// the average model  xbar = (1/M) sum_i x_i  moving exactly like minibatch SGD on the
// average gradient, while the spread of the models (the consensus distance
// (1/M) sum_i ||x_i - xbar||^2) stays bounded by the graph's spectral gap.
//   ring         i +- 1                     (degree 2; 1 for M = 2)
//   torus        a 2-D grid a x b with wrap-around, a the largest divisor of M <= sqrt(M)
//   exponential  i +- 2^k for 2^k < M        (degree ~ 2 log2 M: fast mixing, few messages)
//   complete     everyone                   (W = 1/M: with equal shares, this IS ddp up to
//                                            rounding; the test checks it)
// The mixing sum runs over the members in rank order, so it is reproducible.
// Per step a rank sends |N(i)| models: bytes = |N(i)| * 4 * params, vs ~2 * 4 * params for a
// ring all-reduce — cheaper only for degree <= 2, but with no global synchronisation: a rank
// waits only for its neighbours.
// On one host the models are not sent at all: each rank's model lives in its slots of a
// shared-memory window, where it takes its step, and a one-byte word tells the neighbours
// that x_i' is there; each reads the neighbours' slots where they lie while it mixes, into
// its other slot, which holds the model of the next step. Two slots per rank, by the
// exchange's parity: a rank rewrites a slot (its step, or the mix into it) only after each
// neighbour's word of a later exchange, which a neighbour sends only once it has finished
// mixing the exchange that read that slot, so no slot is rewritten while it is read. The
// model (model.params()) is copied into the slot when an epoch starts and back when it ends.
// On a complete graph (every graph at 2 ranks) the ranks mix the same members, so each
// computes 1/p of the mix into every rank's next slot and a second word closes it (mix_window).
// The same members in the same order make the same sums: the two paths give bit-identical
// models. Messages copy every model into the peer's ring and out again (4 copies a step at
// degree 2, a third of the CPU at 8 ranks on 2 cores); the window copies none.
//
// Reporting: epoch_metrics() gives "consensus_distance" (an all-reduce used for the metric
// only) and evaluate() scores the average model xbar.
// Thread-safety: driven by one thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/heap_stats.h"
#include "coll/shm_context.h"
#include "parallel/dist_common.h"
#include "parallel/model_strategy.h"

namespace dtrain {

// The mix itself: out[i] = (members[0][i] + members[1][i] + ...) * w for i < n, the sum in
// the members' order (rank order: reproducible), member by member over 4096-element blocks
// with the SIMD kernels, through `acc` (4096 floats of scratch). out may be a member. At
// least two members. What Gossip steps with, and what `dtrain bench calibrate` times
// (plan/calibrate_mix.h), so the planner prices this very loop.
void gossip_average(const std::vector<const float*>& members, float w, float* out, size_t n, float* acc);

// The sorted, de-duplicated neighbours of `rank` (never itself). Throws InvalidArgument for
// an unknown topology.
std::vector<int> gossip_neighbors(const std::string& topology, int rank, int world);

class Gossip : public ModelStrategy {
 public:
  // window: on one host (the communicator has a shared-memory context), exchange through a
  // shared-memory window rather than messages (see mix_window); false keeps the messages.
  Gossip(TrainableModel& model, Optimizer& optimizer, Communicator& comm, const std::string& topology,
         Instrument* inst, bool window = true);
  const char* name() const override { return "gossip"; }
  int threads() const override { return 1; }
  LossAcc run_epoch(std::span<const int64_t> order, int64_t batch, const ProgressFn& progress) override;
  Metrics epoch_metrics() override;
  LossAcc evaluate_on(TrainableModel& model, const data::Dataset& ds, ThreadPool* pool) override;
  const Instrument* instrument() const override { return inst_; }

  // One step of the global minibatch; model.params() holds its result.
  LossAcc step(std::span<const int64_t> global_batch);
  const std::vector<int>& neighbors() const { return neighbors_; }
  bool exchanges_through_window() const { return window_ != nullptr; }

 private:
  LossAcc train_step(std::span<const int64_t> global_batch);  // step() on working(), as run_epoch drives it
  std::vector<Request> post_inboxes(int set);  // one irecv per neighbour into inbox set `set`
  void mix(std::vector<Request> inboxes);  // sends x, waits for the inboxes, averages
  void mix_window();                       // says x is in its slot, waits for the neighbours', averages
  // A word to and from every neighbour (the window's), traced as `what` moving recorded_bytes.
  void exchange_words(const char* what, int64_t recorded_bytes);
  // out <- the mean of x and the neighbours' models (given in neighbors_ order), summed in
  // rank order; out may be x.
  void average(const float* x, const std::vector<const float*>& theirs, float* out);
  // The model a step trains: model_.params(), or on the window path the slot of this
  // exchange's parity.
  std::span<float> working();
  // The window path: model_.params() into working() (true) or back (false); nothing otherwise.
  void move_model(bool into_slot);

  Optimizer& opt_;
  Communicator& comm_;
  Instrument* inst_;
  std::vector<int> neighbors_;
  std::unique_ptr<Replica> replica_;
  ShardedEvaluator evaluator_;
  std::vector<float> grad_, mean_;
  // Two sets of inboxes, one per neighbour each (set s at [s * degree, (s + 1) * degree)):
  // the next step's receives are posted into the other set before this step's are waited
  // for, so a neighbour a step ahead never finds none posted (see mix()).
  std::vector<std::vector<float>> inbox_;
  int set_ = 0;                   // the set this step's receives go to
  std::vector<Request> ahead_;    // the next step's, posted early (empty: none)
  int64_t steps_left_ = 0;        // steps left in the epoch run_epoch is in (0: unknown)
  std::vector<Request> ready_;    // the epoch's ready words, in and out (run_epoch)
  std::vector<char> ready_in_;    // one byte per neighbour
  bool have_mean_ = false;
  // The window path: two slots of the model per rank (double buffered by the exchange's
  // parity), counted as this rank's heap; a one-byte word per neighbour and exchange says
  // "my model of this exchange is in my slot".
  std::unique_ptr<ShmWindow> window_;
  std::unique_ptr<CountedAsHeap> window_counted_;
  int64_t exchanges_ = 0;
  std::vector<char> word_in_;
};

}  // namespace dtrain
