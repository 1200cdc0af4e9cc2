// parallel/model_parallel.h — training the GPT on a DP x TP x PP mesh (optionally ZeRO).
//
// One GptTrainer per rank. Given the world and MpConfig it builds the mesh (parallel/mesh.h),
// cuts the model's units (embedding, blocks, head) into P*V contiguous pieces balanced by
// cost (measured on rank 0 and broadcast, or FLOP estimates), builds this rank's V chunks
// with its tensor-parallel shard of every block, and then per step:
//   1. samples the global minibatch (B windows of context+1 characters from the training
//      90% of the text, a pure function of (seed, step)); data-parallel rank d takes
//      windows [d B/D, (d+1) B/D), cut into M micro-batches;
//   2. runs the pipeline schedule (parallel/pipeline.h) — forwards/backwards with TP
//      all-reduces inside every block, gradients accumulated over micro-batches;
//   3. steps the optimizer through ZeroOptimizer over the data-parallel group (stage 0 is
//      plain all-reduce data parallelism), with global-norm clipping across the whole mesh
//      (replicated tensor-parallel parameters counted once), learning rate from a linear
//      warm-up + cosine schedule.
// zero = 3 is FSDP (parallel/zero3.h) and needs tp = pp = 1.
//
// Contract
// - Every rank of the world constructs a GptTrainer with the same config and text and calls
//   step()/evaluate()/stats()/gather_dense() in the same order (they are collective).
// - step() returns the global mean training loss of the minibatch (the same number on every
//   rank); with the same seed, a run on any mesh gives the losses of a 1-rank run to float
//   rounding (tests/parallel/mesh_test.cc).
// - evaluate() returns the mean validation loss over eval_batches fixed batches.
// - gather_dense(out) fills a dense whole GptStage with the current parameters on every rank.
// - Errors: InvalidArgument for a mesh that does not fit the world, a batch not divisible by
//   dp * microbatches, heads not divisible by tp, more pieces than units.
// Thread-safety: one GptTrainer per rank thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "coll/communicator.h"
#include "data/text.h"
#include "nn/transformer.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "parallel/instrument.h"
#include "parallel/mesh.h"
#include "parallel/pipeline.h"
#include "parallel/tensor_parallel.h"
#include "parallel/zero.h"

namespace dtrain {

struct MpConfig {
  GptConfig model;
  MeshShape mesh;
  int micro = 1;                    // M micro-batches per step (per data-parallel rank)
  std::string schedule = "1f1b";    // gpipe | 1f1b | interleaved
  int virtual_stages = 1;           // V
  bool recompute = false;
  int zero = 0;                     // 0 (plain DP) .. 3
  int64_t batch = 32;               // sequences per step, whole mesh
  OptimizerConfig optimizer{.kind = "adamw", .lr = 1e-3f, .weight_decay = 0.1f, .beta1 = 0.9f, .beta2 = 0.99f};
  LrSchedule lr = LrSchedule::constant(1e-3f);
  float clip = 1.0f;                // 0: off
  int64_t eval_batches = 8;
  std::string balance = "flops";    // flops | measured
  uint64_t seed = 1337;
};

struct MpStats {
  std::vector<int> bounds;             // unit boundaries of the P*V pieces
  int steps_timed = 0;                 // steps the bubble is averaged over
  double bubble_measured = 0;          // from wall-clock timelines
  double bubble_replayed = 0;          // timelines replayed with measured CPU per instruction
  double bubble_replayed_median = 0;   // ... with each stage's median Forward/Backward CPU time
  double bubble_formula = 0;
  std::vector<int> max_in_flight;      // per pipeline stage
  std::vector<int64_t> peak_activation_bytes;  // per pipeline stage
  ZeroBytes bytes;                     // this rank, persistent between steps
  ZeroComm zero_comm;                  // this rank, all steps so far
  TpCounts tp;                         // this rank, all steps so far
  int64_t local_params = 0;            // parameters this rank holds (its chunks / shards)
  int64_t model_params = 0;            // the dense model's
};

// The "flops" cost of each unit (embedding, blocks, head) that --balance flops cuts the
// pipeline by (balanced_partition): multiply-adds per token of forward + backward. The
// planner cuts its simulated pipelines with the same costs (plan/simulator.cc).
std::vector<double> gpt_flops_costs(const GptConfig& c);

class GptTrainer {
 public:
  GptTrainer(Communicator& world, const MpConfig& config, const data::TextData& text, Instrument* instrument = nullptr);
  ~GptTrainer();

  float step();
  float evaluate();
  int64_t steps_done() const { return step_; }
  void gather_dense(GptStage& out);
  MpStats stats();
  const std::vector<int>& partition() const { return bounds_; }  // unit boundaries of the pieces
  // Checkpoints: what this rank holds (its chunks' parameters, or its ZeRO-3 shard), its
  // (sharded) optimizer, and the step counter that the batches and the learning rate follow.
  std::span<float> local_params();
  Optimizer& local_optimizer();
  void set_steps_done(int64_t steps) { step_ = steps; }
  Mesh& mesh() { return *mesh_; }
  const MpConfig& config() const { return cfg_; }

  // Training windows of step s for data-parallel rank d (tokens, targets), exposed for tests.
  static void sample_batch(const std::vector<int32_t>& ids, int64_t begin, int64_t end, uint64_t seed, int64_t key,
                           int64_t first, int64_t count, int64_t context, std::vector<int32_t>& x, std::vector<int32_t>& y);

 private:
  class Chunks;
  void build_model_parallel();
  void bind_grads(bool allocate);
  std::vector<double> unit_costs();
  float global_mean(double local, bool contributes, Communicator& over, int divide_by);
  float eval_pipeline(const std::vector<int32_t>& x, const std::vector<int32_t>& y, int64_t seqs);

  Communicator& world_;
  MpConfig cfg_;
  const data::TextData& text_;
  Instrument* instrument_;
  std::unique_ptr<Mesh> mesh_;
  int64_t train_end_ = 0;  // ids [0, train_end_) train, the rest validation
  int64_t step_ = 0;
  // Model-parallel path (zero 0..2).
  std::unique_ptr<TpGroup> tp_;
  std::unique_ptr<TpHooks> hooks_;
  std::unique_ptr<Chunks> chunks_;
  std::vector<int> bounds_;
  PipeSchedule schedule_;
  std::vector<float> params_, grads_;
  std::unique_ptr<ZeroOptimizer> zopt_;
  ClipOptions clip_;
  std::vector<std::vector<InstrTiming>> timelines_;  // recent steps
  int max_in_flight_ = 0;
  int64_t peak_act_ = 0;
  // ZeRO-3 path.
  std::unique_ptr<class Zero3Gpt> zero3_;
};

}  // namespace dtrain
