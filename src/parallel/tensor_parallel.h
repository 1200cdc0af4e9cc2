// parallel/tensor_parallel.h — Megatron-style tensor parallelism as conjugate communication ops.
//
// A layer cut across k ranks needs communication exactly where its pieces meet. Megatron
// writes that communication as autograd ops that come in conjugate pairs — what one does in
// the forward pass, its partner does in the backward pass:
//
//   copy_to      identity forward              all-reduce backward   ("f")
//   reduce_from  all-reduce forward            identity backward     ("g")
// (Megatron's other pairs — scatter/gather of column blocks, all-gather/reduce-scatter of row
// blocks for sequence parallelism — are not built: the GPT does not use them.)
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
// - The GPT blocks (nn/transformer.h) are built split: column-parallel qkv and fc, row-parallel
//   projections, with TpHooks as f and g; shard_gpt_from_dense / place_gpt_shard map between
//   a dense GptStage and its shards.
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
  int64_t bytes = 0;  // payload bytes this rank passed to collectives
  int64_t total() const {
    return allreduce_fwd + allreduce_bwd;
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

 private:
  void record(const char* name, double t0, int64_t bytes);
  Communicator* comm_;
  Instrument* instrument_;
  TpCounts counts_;
};

Var copy_to_tp(TpGroup& tp, const Var& x);
Var reduce_from_tp(TpGroup& tp, const Var& x);

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
