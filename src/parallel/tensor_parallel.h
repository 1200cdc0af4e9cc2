// parallel/tensor_parallel.h — Megatron-style tensor parallelism as conjugate communication ops.
//
// A layer cut across k ranks needs communication exactly where its pieces meet. Megatron
// writes that communication as autograd ops that come in conjugate pairs — what one does in
// the forward pass, its partner does in the backward pass:
//
//   copy_to      identity forward              all-reduce backward   ("f")
//   reduce_from  all-reduce forward            identity backward     ("g")
//   scatter_to   keep my column block forward  all-gather backward
//   gather_from  all-gather columns forward    keep my block backward
//   gather_rows  all-gather rows forward       reduce-scatter backward
//   scatter_rows reduce-scatter rows forward   all-gather backward
//
// With them, a column-parallel Linear (weight rows split: each rank computes a block of the
// output features) and a row-parallel Linear (weight columns split: each rank computes a
// partial sum of every output) pair up as
//   MLP:        y = g( rowpar( gelu( colpar( f(x) ) ) ) ) + b2
// one all-reduce forward (g) and one backward (f) per MLP, no communication in between; the
// attention splits by heads the same way (qkv column-parallel, output projection
// row-parallel). Every op is a no-op (returns its input) on a group of one.
//
// Contract
// - TpGroup wraps the tensor-parallel Communicator (nullptr = a group of one) and counts the
//   collectives it issues by kind and direction (forward/backward) — the tests and the trace
//   show "one all-reduce per MLP block per direction" from these counts. With an Instrument
//   attached each collective is also a span ("tp.allreduce.fwd", ...) in the timeline.
// - Activations are 2-D (rows, features); the column ops cut the last dimension into k
//   equal blocks (it must divide), the row ops the first.
// - ColumnParallelLinear / RowParallelLinear / ParallelMlp hold only their shard;
//   load_from_dense copies their slice of a dense layer so a k-rank layer starts from
//   exactly the dense layer's values. The GPT blocks use TpHooks (f and g above) and
//   shard_gpt_from_dense / gpt_slice map between a dense GptStage and its shards.
// - Collectives must be issued in the same order on every rank of the group: every rank of
//   the group runs the same forward and backward (they do, as replicas of one graph).
// Thread-safety: one training thread per TpGroup.
#pragma once

#include <cstdint>
#include <string>

#include "autograd/ops.h"
#include "coll/communicator.h"
#include "nn/layers.h"
#include "nn/transformer.h"
#include "parallel/instrument.h"

namespace dtrain {

struct TpCounts {
  int64_t allreduce_fwd = 0, allreduce_bwd = 0;
  int64_t allgather_fwd = 0, allgather_bwd = 0;
  int64_t reduce_scatter_fwd = 0, reduce_scatter_bwd = 0;
  int64_t bytes = 0;  // payload bytes this rank passed to collectives
  int64_t total() const {
    return allreduce_fwd + allreduce_bwd + allgather_fwd + allgather_bwd + reduce_scatter_fwd + reduce_scatter_bwd;
  }
};

class TpGroup {
 public:
  explicit TpGroup(Communicator* comm = nullptr, Instrument* instrument = nullptr)
      : comm_(comm), instrument_(instrument) {}
  int size() const { return comm_ ? comm_->size() : 1; }
  int rank() const { return comm_ ? comm_->rank() : 0; }
  Communicator* comm() const { return comm_; }
  const TpCounts& counts() const { return counts_; }
  void reset_counts() { counts_ = {}; }

  // Raw collectives on float buffers (counted; no-ops on a group of one).
  void allreduce(float* data, int64_t n, bool backward);
  void allgather(const float* send, float* recv, int64_t n_per_rank, bool backward);
  void reduce_scatter(const float* send, float* recv, int64_t n_per_rank, bool backward);

 private:
  void record(const char* name, double t0, int64_t bytes);
  Communicator* comm_;
  Instrument* instrument_;
  TpCounts counts_;
};

Var copy_to_tp(TpGroup& tp, const Var& x);
Var reduce_from_tp(TpGroup& tp, const Var& x);
Var scatter_to_tp(TpGroup& tp, const Var& x);
Var gather_from_tp(TpGroup& tp, const Var& x);
Var gather_rows_tp(TpGroup& tp, const Var& x);
Var scatter_rows_tp(TpGroup& tp, const Var& x);

// Weight (out/k, in), bias (out/k): y_local = x W_local^T + b_local; gather_output
// all-gathers the k blocks into (B, out).
class ColumnParallelLinear : public Module {
 public:
  ColumnParallelLinear(TpGroup& tp, int64_t in, int64_t out, bool gather_output, Activation act = Activation::kNone);
  Var forward(Graph& g, const Var& x) override;
  using Module::forward;
  void load_from_dense(const Linear& dense);

 private:
  TpGroup& tp_;
  int64_t in_, out_;
  bool gather_;
  Activation act_;
  Parameter& w_;
  Parameter& b_;
};

// Weight (out, in/k), bias (out) replicated: y = allreduce(x_local W_local^T) + b. With
// input_is_parallel false the full input is scattered first.
class RowParallelLinear : public Module {
 public:
  RowParallelLinear(TpGroup& tp, int64_t in, int64_t out, bool input_is_parallel);
  Var forward(Graph& g, const Var& x) override;
  using Module::forward;
  void load_from_dense(const Linear& dense);

 private:
  TpGroup& tp_;
  int64_t in_, out_;
  bool input_parallel_;
  Parameter& w_;
  Parameter& b_;
};

// The Megatron MLP: column-parallel (act) then row-parallel; matches MLP/Linear pairs.
class ParallelMlp : public Module {
 public:
  ParallelMlp(TpGroup& tp, int64_t in, int64_t hidden, int64_t out, Activation act);
  Var forward(Graph& g, const Var& x) override;
  using Module::forward;
  void load_from_dense(const Linear& first, const Linear& second);

 private:
  ColumnParallelLinear fc1_;
  RowParallelLinear fc2_;
};

// f and g for GptStage's blocks.
class TpHooks : public TensorParallelHooks {
 public:
  explicit TpHooks(TpGroup& tp) : tp_(tp) {}
  Var enter(const Var& x) override { return copy_to_tp(tp_, x); }
  Var exit(const Var& x) override { return reduce_from_tp(tp_, x); }

 private:
  TpGroup& tp_;
};

// This rank's slice of a dense parameter value (a copy), and its inverse.
Tensor tp_slice(const Tensor& full, TpSplit split, int rank, int k);
void tp_place(Tensor& full, const Tensor& part, TpSplit split, int rank, int k);
// Copies every parameter of `shard` (a GptStage built with tp = k) from the same-named
// parameter of `dense` (tp = 1, holding at least the shard's units), sliced for `rank`.
void shard_gpt_from_dense(const GptStage& dense, GptStage& shard, int rank);
// Writes `shard`'s parameters (values, or gradients with grads = true) into their places in
// `dense`. Replicated parameters are written as they are (or skipped: with_replicated false).
void place_gpt_shard(GptStage& dense, const GptStage& shard, int rank, bool grads, bool with_replicated = true);

}  // namespace dtrain
