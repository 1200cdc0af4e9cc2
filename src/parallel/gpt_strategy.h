// parallel/gpt_strategy.h — the GPT on a DP x TP x PP mesh (parallel/model_parallel.h) as a
// Strategy: the rows tp, pp, zero and hybrid of `--strategy` (and single for the GPT).
//
// Rounds are step counts (examples_per_epoch() = 0): round r trains steps [first_step,
// first_step + steps) of the run, each on the batch that (seed, step) selects, with the
// learning rate of that step, so a resumed run repeats exactly what an uninterrupted one does.
// evaluate() is the mean validation loss (the GPT does not classify: accuracies stay 0).
// save() writes this rank's parameters (its pipeline chunks and tensor-parallel shards, or its
// ZeRO-3 shard), its optimizer state and the step counter; each rank checkpoints its own
// part. finish(dir) gathers the dense model and rank 0 writes DIR/model.gpt for `dtrain
// generate`. stats()/summary() report the pipeline bubble (measured, replayed, formula),
// activation memory per stage, ZeRO bytes and traffic and tensor-parallel collective counts.
// Thread-safety: one strategy per rank thread; collective like GptTrainer.
#pragma once

#include <memory>
#include <string>

#include "parallel/model_parallel.h"
#include "parallel/strategy.h"

namespace dtrain {

class GptStrategy : public Strategy {
 public:
  // `world`, `text` and `instrument` (may be null) outlive the strategy.
  GptStrategy(const char* name, Communicator& world, const MpConfig& config, const data::TextData& text,
              Instrument* instrument);
  const char* name() const override { return name_; }
  std::string describe() const override;
  int64_t examples_per_epoch() const override { return 0; }
  bool classifies() const override { return false; }
  LossAcc train_round(const Round& round, const ProgressFn& progress) override;
  LossAcc evaluate(ThreadPool* pool) override;
  int64_t steps() const override { return trainer_.steps_done(); }
  void save(StateSections& state) const override;
  void load(const StateSections& state) override;
  void finish(const std::string& checkpoint_dir) override;
  const Instrument* instrument() const override { return instrument_; }
  Metrics stats() override;
  std::string summary() override;

  GptTrainer& trainer() { return trainer_; }
  const MpConfig& config() const { return trainer_.config(); }
  static std::string model_file(const std::string& checkpoint_dir) { return checkpoint_dir + "/model.gpt"; }

 private:
  const char* name_;
  Communicator& world_;
  const data::TextData& text_;
  Instrument* instrument_;
  mutable GptTrainer trainer_;
  double last_val_ = 0;
  MpStats stats_;  // from the last stats()
};

}  // namespace dtrain
