// parallel/strategy.h — the one interface every training strategy implements.
//
// A run is a sequence of ROUNDS, each followed by an evaluation and (optionally) a
// checkpoint. What a round is depends on the data:
//   - a dataset of examples (the MLP and the sparse linear models): a round is an EPOCH, one
//     pass over `order` (a permutation of the training rows) in minibatches of `batch`;
//   - a sampled corpus (the GPT on a text): a round is `steps` optimizer steps, numbered
//     from `first_step`, each drawing its own batch as a pure function of (seed, step).
// examples_per_epoch() tells which: > 0 for the first kind (the number of training rows),
// 0 for the second. The trainer (train/trainer.h) draws the orders, counts the steps,
// evaluates, checkpoints, resumes and reports; a strategy only trains, evaluates and
// carries its state. Single-machine (single, threads, hogwild), data-parallel (ddp, ps,
// localsgd, gossip, fedavg) and model-parallel (tp, pp, zero, hybrid) strategies all
// implement it; the registry of `--strategy` values is train/strategies.h.
//
// Contract
// - Distributed strategies are collective: every rank of the job constructs its strategy
//   with the same arguments and calls the same methods in the same order.
// - train_round() returns the round's mean training loss (and accuracy, where the model
//   classifies) as measured during the round; progress(done, mean_loss) is called on the
//   calling thread as the round advances (done counts examples, or steps for step rounds).
// - evaluate() scores the model the strategy stands for on the held-out split (the same
//   number on every rank of a job).
// - save(state) writes everything this rank needs to continue exactly where it is (its
//   parameters or shard, optimizer state, server state, step counters) as named sections;
//   load(state) restores them and throws Corrupt / InvalidArgument on a mismatch.
// - finish(dir) is called once after the last round on every rank when the run keeps a
//   checkpoint directory (the GPT writes its dense model there for `dtrain generate`).
// Thread-safety: a strategy object is driven by one thread; it runs its own workers.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "parallel/instrument.h"
#include "parallel/threads_model.h"

namespace dtrain {

using ProgressFn = std::function<void(int64_t done, double mean_loss)>;
using Metrics = std::vector<std::pair<std::string, double>>;
// Named byte sections of a checkpoint (train/checkpoint.h stores them with a checksum).
using StateSections = std::vector<std::pair<std::string, std::vector<uint8_t>>>;

struct Round {
  int64_t index = 0;               // 0-based
  std::span<const int64_t> order;  // epoch rounds: the example order (or a part of the epoch's
                                   // order, with --checkpoint-every); empty for step rounds
  int64_t epoch = 0, part = 0;     // epoch rounds: which epoch, and which part of it (0-based)
  int64_t batch = 0;               // examples (or sequences) per optimizer step, whole job
  int64_t first_step = 0;          // step rounds: steps [first_step, first_step + steps)
  int64_t steps = 0;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual const char* name() const = 0;
  virtual int threads() const { return 1; }
  // The model and data (and anything else a checkpoint must match), e.g. "mlp 784-256-10 on
  // fashion-mnist (60000 x 784), optimizer sgd".
  virtual std::string describe() const = 0;
  virtual int64_t examples_per_epoch() const = 0;
  virtual bool classifies() const { return true; }  // false: accuracies are meaningless

  virtual void begin_round(const Round& /*round*/) {}
  // Epoch rounds: whether a round may be a part of an epoch (--checkpoint-every K steps).
  virtual bool splits_epochs() const { return true; }
  virtual LossAcc train_round(const Round& round, const ProgressFn& progress) = 0;
  virtual Metrics round_metrics() { return {}; }
  virtual LossAcc evaluate(ThreadPool* pool) = 0;
  virtual int64_t steps() const = 0;  // optimizer steps taken so far (restored ones included)

  virtual void save(StateSections& state) const = 0;
  virtual void load(const StateSections& state) = 0;
  virtual void finish(const std::string& /*checkpoint_dir*/) {}

  virtual const Instrument* instrument() const { return nullptr; }
  // Strategy-specific results for the report: numbers for the JSON (collective: every rank
  // calls it once after training) and lines for the summary (local, after stats()).
  virtual Metrics stats() { return {}; }
  virtual std::string summary() { return ""; }
};

// The section called `name`, or nullptr.
const std::vector<uint8_t>* find_section(const StateSections& state, const std::string& name);
// Floats <-> bytes for sections.
std::vector<uint8_t> float_bytes(std::span<const float> values);
void load_floats(const StateSections& state, const std::string& name, std::span<float> out, const char* what);

}  // namespace dtrain
