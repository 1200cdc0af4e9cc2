// nn/transformer.h — a GPT-style character transformer, cut into units that pipeline stages,
// ZeRO-3 and tensor parallelism can take apart.
//
// The model (nanoGPT's): token + position embeddings, L blocks of
//   x = x + proj(attn(ln1(x)))        causal multi-head self-attention, heads of width W/H
//   x = x + fc2(gelu(fc1(ln2(x))))    MLP W -> 4W -> W
// then a final LayerNorm and an untied LM head (V, W) without bias, cross-entropy.
//
// Contract
// - GptConfig::parse("gpt:layers=4,heads=4,width=128,context=64", vocab) reads the
//   command-line spec (keys in any order, each optional; unknown keys, width not divisible by
//   heads and non-positive sizes throw InvalidArgument naming the key).
// - The model is a list of UNITS: unit 0 the embedding, units 1..L the blocks, unit L+1 the
//   head. GptStage(config, begin, end, tp) is a Module holding units [begin, end) with ONE
//   flat buffer; the whole model is GptStage(config, 0, L + 2). Parameter names do not depend
//   on the cut ("blocks.3.attn.qkv.weight" in any stage that holds block 3), and a unit's
//   parameters are one contiguous range [unit_offset(u), + unit_numel(u)) of the stage's
//   buffer, in the same order as in the whole model.
// - tp = k > 1 builds the tensor-parallel shard of every block (Megatron): attn.qkv and mlp.fc
//   keep 1/k of their output rows (for qkv, 1/k of each of the q, k, v blocks: whole heads),
//   attn.proj and mlp.proj keep 1/k of their input columns; everything else is replicated.
//   tp_split(name) says which; heads % k == 0 is required. The communication between the
//   pieces is not here: blocks call TensorParallelHooks::enter (Megatron's f: identity
//   forward, all-reduce backward) before each column-parallel layer and exit (g: all-reduce
//   forward, identity backward) after each row-parallel one; with no hooks both are the
//   identity and the model is the dense one. Row-parallel biases are added after exit().
// - forward_stage() runs the units: the embedding needs tokens (batch * seq ids, row
//   b * seq + t), a middle stage takes and returns activations (batch * seq, width), the head
//   returns the mean cross-entropy over the targets — or the logits when targets is empty.
// - Initialization (init_gpt): weights N(0, 0.02), the two residual projections
//   N(0, 0.02 / sqrt(2L)), biases 0, LayerNorm 1/0 — from a stream per parameter NAME, so a
//   stage or a dense model initialised with the same seed hold the same values. A tensor-
//   parallel shard is filled by slicing the dense values (parallel/tensor_parallel.h).
// - set_grad_mode(kAccumulate) makes backward add into the gradient buffer (micro-batches).
// Thread-safety: as nn/module.h.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "nn/module.h"

namespace dtrain {

struct GptConfig {
  int64_t vocab = 65;
  int64_t layers = 4;
  int64_t heads = 4;
  int64_t width = 128;
  int64_t context = 64;

  int num_units() const { return static_cast<int>(layers) + 2; }
  std::string spec() const;  // "gpt:layers=4,heads=4,width=128,context=64"
  static GptConfig parse(const std::string& spec, int64_t vocab);
};

// Megatron's f and g, supplied by parallel/tensor_parallel.h.
class TensorParallelHooks {
 public:
  virtual ~TensorParallelHooks() = default;
  virtual Var enter(const Var& x) = 0;  // identity forward, all-reduce backward
  virtual Var exit(const Var& x) = 0;   // all-reduce forward, identity backward
};

enum class TpSplit { kReplicated, kRows, kRows3, kCols };
// How a parameter (by name, any prefix) is cut across a tensor-parallel group.
TpSplit tp_split(const std::string& name);

class GptUnit : public Module {
 public:
  Var forward(Graph& graph, const Var& x) override;
  using Module::forward;
  GradMode grad_mode = GradMode::kOverwrite;

 protected:
  Var pv(Graph& g, const Parameter& p) const { return g.param(p.value, p.grad, grad_mode); }
  friend class GptStage;
};

class GptStage : public Module {
 public:
  GptStage(const GptConfig& config, int unit_begin, int unit_end, int tp_size = 1);
  ~GptStage() override;

  // x: the stage input (ignored when the stage holds the embedding). Returns activations,
  // the mean loss (head + targets) or logits (head, no targets).
  Var forward_stage(Graph& g, const Var& x, std::span<const int32_t> tokens, std::span<const int32_t> targets,
                    int64_t batch, int64_t seq, TensorParallelHooks* hooks = nullptr);
  // Units [first, last) of this stage (global unit indices, within [unit_begin, unit_end)):
  // x is unit `first`'s input; activation checkpointing re-runs one unit at a time.
  Var forward_units(Graph& g, const Var& x, std::span<const int32_t> tokens, std::span<const int32_t> targets,
                    int64_t batch, int64_t seq, TensorParallelHooks* hooks, int first, int last);
  // Module interface: activations -> activations (or logits), for stages without embedding.
  Var forward(Graph& graph, const Var& x) override;
  using Module::forward;

  const GptConfig& config() const { return config_; }
  int unit_begin() const { return begin_; }
  int unit_end() const { return end_; }
  int tp_size() const { return tp_; }
  bool has_embedding() const { return begin_ == 0; }
  bool has_head() const { return end_ == config_.num_units(); }
  int64_t unit_offset(int unit) const;  // in this stage's flat buffer
  int64_t unit_numel(int unit) const;
  void set_grad_mode(GradMode mode);

  // Deterministic init by parameter name (see the contract).
  void init_gpt(uint64_t seed);
  // Set by forward_stage for the next call (tests, pipeline executor).
  void set_training_batch(int64_t batch, int64_t seq) { batch_ = batch, seq_ = seq; }

 private:
  GptConfig config_;
  int begin_, end_, tp_;
  int64_t batch_ = 0, seq_ = 0;
  std::vector<std::unique_ptr<GptUnit>> units_;
};

// Number of parameters of the dense model (all units).
int64_t gpt_num_params(const GptConfig& config);

}  // namespace dtrain
