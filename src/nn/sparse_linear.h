// nn/sparse_linear.h — linear models over sparse rows: logistic regression, hinge-loss SVM
// and multiclass softmax, reading LIBSVM-style rows without densifying them.
//
// Model. With K outputs (K = 1 for the binary losses, K = classes for softmax) the scores of
// a row x are s_c = b_c + sum_j x_j W[j, c], summed over the row's nonzeros only.
//   logistic  y = +1 for class 1, -1 for class 0; loss log(1 + e^{-y s});  dL/ds = -y sigma(-y s)
//   hinge     loss max(0, 1 - y s);                                        dL/ds = -y if y s < 1
//   softmax   loss -log softmax(s)[label];                                 dL/ds_c = p_c - [c == label]
// The gradient w.r.t. W[j, c] is x_j dL/ds_c: it is nonzero only on the row's coordinates,
// so a step touches nnz * K + K parameters, which is what makes HOGWILD! updates sparse.
// An optional L2 term (l2/2)||W||^2 is applied lazily, on the touched coordinates only, as in
// the HOGWILD! paper's sparse SVM.
//
// Layout: ONE flat buffer of (features + 1) * K floats, feature-major — W[j, c] at j*K + c
// (a row's K weights are adjacent), then the K biases. Initial parameters are zero.
//
// Access policies. The kernels are templates over how they read and write the buffer:
//   PlainAccess    ordinary loads and stores (one thread, or the caller holds a lock);
//   RelaxedAccess  std::atomic_ref<float> relaxed loads and load+store updates: the
//                  HOGWILD! policy. A concurrent update of the same coordinate can be lost
//                  (no read-modify-write atomicity), which the HOGWILD! analysis tolerates,
//                  but no access is a data race in the C++ sense, so TSan stays quiet.
// Thread-safety: SparseLinear is immutable after construction; thread safety of the buffer
// is the access policy's.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tensor/sparse.h"

namespace dtrain {

enum class SparseLoss { kLogistic, kHinge, kSoftmax };

SparseLoss parse_sparse_loss(const std::string& name);  // logreg | svm | softmax
const char* sparse_loss_name(SparseLoss loss);

struct PlainAccess {
  static float load(const float* p) { return *p; }
  static void add(float* p, float delta) { *p += delta; }
};

struct RelaxedAccess {
  static float load(const float* p) {
    return std::atomic_ref<float>(*const_cast<float*>(p)).load(std::memory_order_relaxed);
  }
  static void add(float* p, float delta) {
    std::atomic_ref<float> ref(*p);
    ref.store(ref.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
  }
};

class SparseLinear {
 public:
  // Throws InvalidArgument when a binary loss gets a dataset with other than 2 classes.
  SparseLinear(SparseLoss loss, int64_t features, int num_classes, float l2 = 0.0f);

  SparseLoss loss() const { return loss_; }
  int64_t features() const { return features_; }
  int outputs() const { return k_; }
  float l2() const { return l2_; }
  int num_classes() const { return classes_; }
  int64_t num_params() const { return (features_ + 1) * k_; }
  int64_t bias_offset() const { return features_ * k_; }
  std::string describe() const;

  // scores[0..K) of a row; out must not overlap params. It is restrict: otherwise, as far as the compiler can tell, it might alias the
  // parameters, and every term is a load and a store it may not vectorise (news20 softmax,
  // one thread: 390k -> 450k examples/s with it).
  template <class Access>
  void scores(const float* params, const SparseRow& row, float* __restrict out) const {
    const int k = k_;
    const float* bias = params + features_ * k;
    for (int c = 0; c < k; ++c) out[c] = Access::load(bias + c);
    for (int64_t n = 0; n < row.nnz; ++n) {
      const float x = row.val[n];
      const float* w = params + int64_t{row.idx[n]} * k;
      for (int c = 0; c < k; ++c) out[c] += x * Access::load(w + c);
    }
  }

  // Loss of one example and dL/ds (overwrites dscore[0..K)); scores are overwritten too.
  float loss_and_dscore(float* scores, int label, float* dscore) const;
  // Predicted class from the scores.
  int predict_from_scores(const float* scores) const;

  // params[j*K + c] += scale * x_j * dscore[c] for the row's nonzeros, biases += scale *
  // dscore, plus the lazy L2 term (-lr * l2 * w on touched weights when scale = -lr).
  template <class Access>
  void update(float* params, const SparseRow& row, const float* dscore, float scale) const {
    // k and l2 in locals: the compiler cannot keep members in registers across atomic stores.
    const int k = k_;
    const float l2 = l2_;
    for (int64_t n = 0; n < row.nnz; ++n) {
      const float sx = scale * row.val[n];
      float* w = params + int64_t{row.idx[n]} * k;
      if (l2 == 0.0f) {
        for (int c = 0; c < k; ++c) Access::add(w + c, sx * dscore[c]);
      } else {
        for (int c = 0; c < k; ++c) Access::add(w + c, sx * dscore[c] + scale * l2 * Access::load(w + c));
      }
    }
    float* bias = params + bias_offset();
    for (int c = 0; c < k; ++c) Access::add(bias + c, scale * dscore[c]);
  }

  // One example end to end: scores, loss, gradient, and the update with scale -lr*weight.
  // Returns the loss; *correct is set when the prediction (before the update) was right.
  template <class Access>
  float sgd_example(float* params, const SparseRow& row, int label, float lr, bool* correct,
                    float* scratch) const {
    float* s = scratch;
    float* ds = scratch + k_;
    scores<Access>(params, row, s);
    *correct = predict_from_scores(s) == label;
    float loss = loss_and_dscore(s, label, ds);
    update<Access>(params, row, ds, -lr);
    return loss;
  }

  // Mean loss and the number of correct predictions over examples of `ds`; with grad given,
  // also grad = mean gradient (grad is overwritten; it must have num_params() floats).
  // A data::Dataset converts to SparseRows implicitly.
  double loss_grad(std::span<const float> params, const SparseRows& ds, std::span<const int64_t> examples,
                   std::span<float> grad, int64_t* correct) const;

 private:
  SparseLoss loss_;
  int64_t features_;
  int classes_;
  int k_;
  float l2_;
};

}  // namespace dtrain
