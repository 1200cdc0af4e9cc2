// parallel/fedavg.h — federated averaging (McMahan et al. 2017), K clients simulated on M ranks.
//
// Algorithm. The training set is split among K clients once: IID (a seeded permutation cut
// into K pieces) or non-IID (data::dirichlet_partition with concentration alpha: small alpha
// gives each client a few dominant labels). Each ROUND (one trainer "epoch"):
//  1. the same seeded sample S_t of m = max(1, round(C*K)) clients is drawn on every rank;
//  2. client k (simulated by rank k mod M) starts from the global model w_t, and trains E
//     local epochs of minibatch SGD (batch B, a fresh local optimizer of the run's kind) over
//     its own examples, in the order epoch_permutation(n_k, seed_k, t*E + e) of its list;
//  3. the server average w_{t+1} = sum_{k in S_t} (n_k / n_S) w_k is one all-reduce of the
//     ranks' partial weighted sums (deterministic order), so every rank holds w_{t+1}.
// With one client, C = 1, E = 1 this is exactly one epoch of plain minibatch training
// (client 0's seed is the run's seed and its list is 0..n-1, weight n_k/n_S = 1): the test
// checks it bit for bit against the `single` strategy.
// Communication per round: one all-reduce of the model, against one per step for ddp.
//
// epoch_metrics(): "clients" sampled and "client_examples" trained this round.
// Thread-safety: driven by one thread.
#pragma once

#include <memory>
#include <vector>

#include "parallel/dist_common.h"
#include "parallel/model_strategy.h"

namespace dtrain {

struct FedAvgOptions {
  int clients = 10;
  double fraction = 0.1;
  int64_t local_epochs = 1;
  double dirichlet = 0;  // 0 = IID
  uint64_t seed = 0;
  OptimizerConfig optimizer;  // each client's local optimizer (fresh every round)
};

// The m = max(1, round(fraction x clients)) clients of round `round`, sorted: a pure function
// of its arguments, so every rank (and the planner, plan/simulator.h) draws the same sample.
std::vector<int> fedavg_sample(int clients, double fraction, uint64_t seed, int64_t round);

class FedAvg : public ModelStrategy {
 public:
  FedAvg(TrainableModel& model, Communicator& comm, const FedAvgOptions& options, const float* lr, Instrument* inst);
  const char* name() const override { return "fedavg"; }
  int threads() const override { return 1; }
  void begin_epoch(int64_t round) override { round_ = round; }
  bool splits_epochs() const override { return false; }  // an "epoch" is one federated round
  LossAcc run_epoch(std::span<const int64_t> order, int64_t batch, const ProgressFn& progress) override;
  Metrics epoch_metrics() override {
    return {{"clients", static_cast<double>(sampled_)}, {"client_examples", static_cast<double>(round_examples_)}};
  }
  LossAcc evaluate_on(TrainableModel& model, const data::Dataset& ds, ThreadPool* pool) override {
    return evaluator_.evaluate(model, ds, pool);
  }
  const Instrument* instrument() const override { return inst_; }

  // The clients of round t, sorted (the same on every rank): fedavg_sample.
  std::vector<int> sample(int64_t round) const;
  const std::vector<std::vector<int64_t>>& partition() const { return parts_; }

 private:
  Communicator& comm_;
  FedAvgOptions o_;
  const float* lr_;
  Instrument* inst_;
  std::vector<std::vector<int64_t>> parts_;
  std::unique_ptr<Replica> replica_;
  ShardedEvaluator evaluator_;
  std::vector<float> global_, grad_, sum_;
  int64_t round_ = 0;
  int64_t sampled_ = 0, round_examples_ = 0;
};

}  // namespace dtrain
