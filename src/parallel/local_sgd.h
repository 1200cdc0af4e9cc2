// parallel/local_sgd.h — Local SGD (periodic model averaging) and post-local SGD.
//
// Algorithm (Stich 2019; Lin et al. 2020 for post-local SGD). Every rank keeps its own copy
// of the model and its own optimizer state. At step t the ranks look at the same global
// minibatch as ddp (B items; rank r takes data::batch_share(B, r, M)), but each rank applies
// its optimizer to ITS OWN mean gradient — no communication. Every H = sync_every local steps
// (and at the end of every epoch, so evaluation and checkpoints see one model) an all-reduce
// replaces every model by the average  x <- (1/M) sum_r x_r. Optimizer state (momentum)
// stays local. With H = 1 and SGD or momentum SGD this is ddp up to rounding (the average of
// M updates equals the update with the average gradient, by linearity); larger H trades
// statistical efficiency for H times fewer all-reduces.
// Post-local SGD: for the first `post_local_epochs` epochs the strategy delegates to ordinary
// ddp (gradient all-reduce every step), then switches to local steps.
//
// Accounting: local steps are compute; each model average is a blocking all-reduce (comm and
// wait). epoch_metrics(): "averages" (model averages this epoch).
// Thread-safety: driven by one thread.
#pragma once

#include <memory>

#include "parallel/data_parallel.h"

namespace dtrain {

struct LocalSgdOptions {
  int64_t sync_every = 8;
  int64_t post_local_epochs = 0;
  DdpOptions ddp;  // algorithm (and, for the post-local phase, buckets)
};

class LocalSgd : public ModelStrategy {
 public:
  LocalSgd(TrainableModel& model, Optimizer& optimizer, Communicator& comm, const LocalSgdOptions& options,
           Instrument* inst);
  const char* name() const override { return "localsgd"; }
  int threads() const override { return 1; }
  void begin_epoch(int64_t epoch) override { epoch_ = epoch; }
  LossAcc run_epoch(std::span<const int64_t> order, int64_t batch, const ProgressFn& progress) override;
  Metrics epoch_metrics() override {
    return {{"averages", static_cast<double>(averages_)}};
  }
  LossAcc evaluate_on(TrainableModel& model, const data::Dataset& ds, ThreadPool* pool) override {
    return evaluator_.evaluate(model, ds, pool);
  }
  const Instrument* instrument() const override { return inst_; }

  // One local step on this rank's share of `global_batch`; averages when due.
  LossAcc step(std::span<const int64_t> global_batch);
  void average();

 private:
  Optimizer& opt_;
  Communicator& comm_;
  LocalSgdOptions o_;
  Instrument* inst_;
  std::unique_ptr<Replica> replica_;
  std::unique_ptr<DataParallel> ddp_;  // post-local phase
  ShardedEvaluator evaluator_;
  std::vector<float> grad_;
  int64_t epoch_ = 0;
  int64_t since_average_ = 0;
  int64_t averages_ = 0;
};

}  // namespace dtrain
