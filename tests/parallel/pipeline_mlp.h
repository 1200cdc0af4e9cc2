// tests/parallel/pipeline_mlp.h — a test fixture of the pipeline engine (parallel/pipeline.h): the MLP of the earlier issues, cut into pipeline pieces.
//
// An MLP d0-d1-...-dn (nn/mlp.h: n Linear layers, ReLU after every layer but the last) is
// cut into P*V contiguous pieces of layers, balanced by multiply-adds (balanced_partition),
// and piece c*P + s is chunk c of rank s, as for the GPT. Each piece is its own Module with
// its own flat buffer, so a rank's optimizer steps its chunks' spans. Activations crossing a
// boundary after layer i are (micro-batch rows, d_{i+1}) — a different shape per boundary,
// which activation_shape(piece) reports to the executor.
//
// Contract
// - MlpPipeline(spec, stages, chunks, rank) builds this rank's chunks; load_from(dense)
//   copies their layers from a dense MLP of the same spec (so pipeline and dense start equal).
// - set_batch(x, labels, micro) splits a batch of B rows into `micro` equal micro-batches
//   (B % micro == 0, InvalidArgument otherwise); the last piece returns the micro-batch's
//   mean cross-entropy, so with the executor's 1/M seed the accumulated gradients are the
//   gradients of the whole batch's mean loss — the dense MLP's (tests/parallel/pipeline_test.cc).
// - layer(i) is this rank's Linear for global layer i (nullptr if another rank holds it);
//   its gradients accumulate over micro-batches and steps: zero_grads() before a step.
// Thread-safety: one per rank thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/layers.h"
#include "nn/mlp.h"
#include "parallel/pipeline.h"

namespace dtrain {

class MlpPipeline : public PipelineModel {
 public:
  MlpPipeline(const std::string& spec, int stages, int chunks, int rank);
  ~MlpPipeline() override;

  void load_from(MLP& dense);
  void set_batch(const Tensor& x, std::vector<int32_t> labels, int micro);

  Var forward(Graph& g, int chunk, int micro, const Var& input) override;
  Shape activation_shape(int piece) const override;
  std::vector<std::span<const float>> param_buffers() const override;

  // Layers [begin, end) of piece p (global layer indices).
  const std::vector<int>& bounds() const { return bounds_; }
  // This rank's Linear for global layer i, or nullptr.
  Linear* layer(int i);
  void zero_grads();

 private:
  struct Piece;
  std::vector<int64_t> dims_;
  int stages_, chunks_, rank_;
  std::vector<int> bounds_;
  std::vector<std::unique_ptr<Piece>> mine_;  // per chunk
  std::vector<Tensor> xs_;
  std::vector<std::vector<int32_t>> ys_;
  int64_t rows_ = 0;
};

}  // namespace dtrain
