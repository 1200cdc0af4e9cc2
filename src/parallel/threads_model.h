// parallel/threads_model.h — what the single-machine strategies need from a model.
//
// Contract
// - TrainableModel owns ONE flat parameter buffer (params()) and knows the training set it
//   learns from. make_replica() gives a worker its own scratch (gradient buffer, autograd
//   graph, per-thread module object); several replicas may run at once on different threads.
// - Replica::loss_grad(params, examples, grad) evaluates at `params` (read only) and returns
//   the MEAN loss over `examples`, the number it classified correctly, and — when grad is
//   non-empty — overwrites grad with the MEAN gradient. It is a pure function of its
//   arguments: the same inputs give the same bits, whichever thread runs it.
// - loss_grad_staged(...) is loss_grad for strategies that overlap communication with the
//   backward pass: it calls ready(offset, len) as soon as grad[offset, offset + len) holds its
//   final value, in the order grad_units() lists (backward order: for an MLP the last layer
//   first). The units tile [0, num_params) exactly; ready is called for every unit, also for
//   an empty example list (the grad is then zero), so every rank sees the same sequence. The
//   gradient is grad_scale times loss_grad's (the scale seeds the backward pass, so no extra
//   pass over the gradient; with grad_scale = 1 the bits equal loss_grad's). The default
//   finishes everything, scales, then reports one unit.
// - evaluate(ds) returns mean loss and accuracy of the current parameters on any dataset of
//   the same shape (e.g. the test split).
// - sparse() is non-null for the sparse linear models, which HOGWILD! updates coordinate by
//   coordinate instead of through dense gradients.
// Two models exist: SparseModel (nn/sparse_linear.h on LIBSVM rows) and MlpModel (nn/mlp.h on
// dense rows; replicas bind the shared parameters and their own gradients).
// Thread-safety: params() is shared; replicas are per thread; evaluate() is one caller at a
// time and must not overlap training steps.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "nn/sparse_linear.h"

namespace dtrain {

class ThreadPool;

struct LossAcc {
  double loss = 0;
  int64_t correct = 0;
  int64_t examples = 0;
  double accuracy() const { return examples ? static_cast<double>(correct) / static_cast<double>(examples) : 0.0; }
};

// A contiguous range [offset, offset + len) of the flat gradient.
struct GradRange {
  int64_t offset = 0;
  int64_t len = 0;
};
using GradReadyFn = std::function<void(GradRange)>;

class Replica {
 public:
  virtual ~Replica() = default;
  virtual LossAcc loss_grad(std::span<const float> params, std::span<const int64_t> examples,
                            std::span<float> grad) = 0;
  virtual std::vector<GradRange> grad_units(int64_t num_params) const { return {GradRange{0, num_params}}; }
  virtual LossAcc loss_grad_staged(std::span<const float> params, std::span<const int64_t> examples,
                                   std::span<float> grad, const GradReadyFn& ready, float grad_scale) {
    LossAcc r = loss_grad(params, examples, grad);
    if (grad_scale != 1.0f)
      for (float& g : grad) g *= grad_scale;
    if (ready) ready(GradRange{0, static_cast<int64_t>(grad.size())});
    return r;
  }
};

class TrainableModel {
 public:
  virtual ~TrainableModel() = default;
  virtual std::string describe() const = 0;
  virtual int64_t num_params() const = 0;
  virtual std::span<float> params() = 0;
  virtual const data::Dataset& train_set() const = 0;
  virtual std::unique_ptr<Replica> make_replica() = 0;
  virtual LossAcc evaluate(const data::Dataset& ds, ThreadPool* pool = nullptr) = 0;
  virtual const SparseLinear* sparse() const { return nullptr; }
  // Class probabilities (softmax of the logits), rows x classes, row-major; for ensembles.
  virtual std::vector<float> probabilities(const data::Dataset& ds);
};

// A sparse linear model ("logreg", "svm", "softmax") over a sparse training set.
std::unique_ptr<TrainableModel> make_sparse_model(SparseLoss loss, const data::Dataset& train, float l2 = 0.0f);
// An MLP from a spec "784-256-128-10" over a dense training set; the first and last widths
// must match the data (features, classes). Parameters initialised from `seed`.
std::unique_ptr<TrainableModel> make_mlp_model(const std::string& spec, const data::Dataset& train, uint64_t seed);

}  // namespace dtrain
