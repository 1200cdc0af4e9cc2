// parallel/zero3.h — ZeRO stage 3 / FSDP for the GPT: parameters sharded too.
//
// Each of N data-parallel ranks stores, for every unit u of the model (embedding, each block,
// head), only its shard of the unit's parameters, of its gradients and of the optimizer state:
// about 16n/N bytes for float32 Adam instead of 16n. A unit's full parameters exist only while
// the unit computes:
//   forward   for u = embedding .. last block: all-gather u's parameters, run u on a graph
//             that records nothing (keeping only u's input), free the parameters;
//             the head: all-gather, run with recording, backward from the loss at once
//   backward  for u = last block .. embedding: all-gather u's parameters again, re-run u's
//             forward with recording from the kept input, backward with the gradient that
//             came from u + 1, reduce-scatter u's parameter gradients into this rank's
//             shard (mean over ranks), free the parameters and gradients
//   step      (optionally clip by the global norm: shard squares summed over the ranks) and
//             the optimizer over this rank's shards only.
// Per step that is an all-gather in the forward, another in the backward (all units but the
// head) and a reduce-scatter: about 1.5x the bus bytes of one all-reduce of the gradients.
// (Re-running each unit's forward in the backward is activation checkpointing per unit; it
// keeps only unit inputs alive, the usual pairing with FSDP.)
//
// Contract
// - Zero3Gpt(dp, config, init, optimizer) takes this rank's shards from `init`, a dense
//   model every rank builds identically (it can be freed afterwards). step() trains one
//   local batch and returns its mean loss; the update equals plain data parallelism on the
//   mean gradient (to float rounding of the reductions).
// - gather_dense(out) all-gathers every unit into a dense GptStage (collective).
// - bytes(): persistent bytes between steps (params, grads, optimizer state: measured);
//   peak_unit_bytes(): the largest unit's gathered parameters + gradients (transient).
// - With an Instrument, step() records its timeline: compute spans "F<u>" (a unit's forward),
//   "head" (the head's forward and backward), "B<u>" (a unit's re-run forward and backward)
//   and "optimizer" (clipping and the step), and comm spans "zero3.allgather" and
//   "zero3.reduce_scatter" on the training thread, with their bytes.
// Thread-safety: one training thread per rank.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "coll/communicator.h"
#include "nn/transformer.h"
#include "optim/optimizer.h"
#include "parallel/instrument.h"
#include "parallel/zero.h"

namespace dtrain {

class Zero3Gpt {
 public:
  Zero3Gpt(Communicator* dp, const GptConfig& config, const GptStage& init, const OptimizerConfig& optimizer,
           Instrument* instrument = nullptr);
  ~Zero3Gpt();

  float step(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t batch, int64_t seq, float lr,
             float clip_norm = 0);
  // Mean loss without training (evaluation): all-gather each unit, forward only.
  float evaluate(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t batch, int64_t seq);
  void gather_dense(GptStage& out);

  ZeroBytes bytes() const;
  int64_t peak_unit_bytes() const { return peak_unit_bytes_; }
  const ZeroComm& comm() const { return comm_; }  // training steps only (not evaluate/gather_dense)
  int64_t num_params() const { return n_total_; }
  std::span<float> shard_params() { return shard_params_; }  // this rank's shard (checkpoints)
  Optimizer& optimizer() { return *opt_; }

 private:
  struct Unit;
  void gather(Unit& u, std::vector<float>& full, bool count = true);  // count: training traffic
  void reduce_grads(Unit& u, std::vector<float>& full_grads);

  Communicator* dp_;
  int ranks_, rank_;
  GptConfig config_;
  std::vector<std::unique_ptr<Unit>> units_;
  std::vector<float> shard_params_, shard_grads_;
  std::unique_ptr<Optimizer> opt_;
  int64_t n_total_ = 0;
  int64_t peak_unit_bytes_ = 0;
  ZeroComm comm_;
  Instrument* instrument_ = nullptr;
  // Spans [t0, now] (when instrumented): compute, and comm on the training thread with its
  // bytes also in the event's args.
  void compute_span(const std::string& name, double t0);
  void comm_span(const char* name, double t0, int64_t bytes);
};

}  // namespace dtrain
