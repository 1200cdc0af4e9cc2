#include "nn/sparse_linear.h"

#include <algorithm>
#include <sstream>

#include "base/error.h"

namespace dtrain {

SparseLoss parse_sparse_loss(const std::string& name) {
  if (name == "logreg") return SparseLoss::kLogistic;
  if (name == "svm") return SparseLoss::kHinge;
  if (name == "softmax") return SparseLoss::kSoftmax;
  DT_THROW(InvalidArgument, "unknown sparse model '" << name << "'; use logreg, svm or softmax");
}

const char* sparse_loss_name(SparseLoss loss) {
  switch (loss) {
    case SparseLoss::kLogistic: return "logreg";
    case SparseLoss::kHinge: return "svm";
    case SparseLoss::kSoftmax: return "softmax";
  }
  return "?";
}

SparseLinear::SparseLinear(SparseLoss loss, int64_t features, int num_classes, float l2)
    : loss_(loss), features_(features), classes_(num_classes), k_(loss == SparseLoss::kSoftmax ? num_classes : 1),
      l2_(l2) {
  DT_CHECK(features >= 1, InvalidArgument, "a linear model needs at least one feature, got " << features);
  DT_CHECK(l2 >= 0, InvalidArgument, "the L2 coefficient must be >= 0, got " << l2);
  if (loss != SparseLoss::kSoftmax) {
    DT_CHECK(num_classes == 2, InvalidArgument,
             sparse_loss_name(loss) << " is a binary model but the dataset has " << num_classes
                                    << " classes; use --model softmax for multiclass data");
  } else {
    DT_CHECK(num_classes >= 2, InvalidArgument, "softmax needs at least 2 classes, got " << num_classes);
  }
}

std::string SparseLinear::describe() const {
  std::ostringstream os;
  os << sparse_loss_name(loss_) << " (" << features_ << " features x " << k_ << " outputs, " << num_params()
     << " parameters)";
  return os.str();
}

float SparseLinear::loss_and_dscore(float* s, int label, float* ds) const {
  switch (loss_) {
    case SparseLoss::kLogistic: {
      const float y = label == 1 ? 1.0f : -1.0f;
      const float z = -y * s[0];
      // log(1 + e^z) computed stably; sigma(z) = 1 / (1 + e^{-z}).
      const float loss = z > 0 ? z + std::log1p(std::exp(-z)) : std::log1p(std::exp(z));
      const float sig = 1.0f / (1.0f + std::exp(-z));
      ds[0] = -y * sig;
      return loss;
    }
    case SparseLoss::kHinge: {
      const float y = label == 1 ? 1.0f : -1.0f;
      const float margin = y * s[0];
      ds[0] = margin < 1.0f ? -y : 0.0f;
      return std::max(0.0f, 1.0f - margin);
    }
    case SparseLoss::kSoftmax: {
      const float mx = *std::max_element(s, s + k_);
      float sum = 0;
      for (int c = 0; c < k_; ++c) sum += (ds[c] = std::exp(s[c] - mx));
      const float inv = 1.0f / sum;
      for (int c = 0; c < k_; ++c) ds[c] *= inv;
      const float loss = std::log(sum) + mx - s[label];
      ds[label] -= 1.0f;
      return loss;
    }
  }
  return 0;
}

int SparseLinear::predict_from_scores(const float* s) const {
  if (k_ == 1) return s[0] > 0 ? 1 : 0;
  return static_cast<int>(std::max_element(s, s + k_) - s);
}

double SparseLinear::loss_grad(std::span<const float> params, const SparseRows& ds,
                               std::span<const int64_t> examples, std::span<float> grad, int64_t* correct) const {
  DT_CHECK(ds.is_sparse(), InvalidArgument, "sparse models need sparse (LIBSVM) data; " << ds.source << " is dense");
  DT_CHECK_EQ(static_cast<int64_t>(params.size()), num_params(), InvalidArgument, "parameter buffer size");
  DT_CHECK(ds.cols <= features_, InvalidArgument,
           ds.source << " has " << ds.cols << " features but the model " << features_);
  const bool want_grad = !grad.empty();
  if (want_grad) {
    DT_CHECK_EQ(static_cast<int64_t>(grad.size()), num_params(), InvalidArgument, "gradient buffer size");
    std::fill(grad.begin(), grad.end(), 0.0f);
  }
  std::vector<float> scratch(static_cast<size_t>(2 * k_));
  double total = 0;
  int64_t right = 0;
  const float inv_n = examples.empty() ? 0.0f : 1.0f / static_cast<float>(examples.size());
  for (int64_t e : examples) {
    const SparseRow row = ds.row(e);
    const int label = ds.labels[e];
    scores<PlainAccess>(params.data(), row, scratch.data());
    right += predict_from_scores(scratch.data()) == label;
    total += loss_and_dscore(scratch.data(), label, scratch.data() + k_);
    if (want_grad) {
      // The gradient (not an update): same coordinates as update(), read-only params.
      const float* ds_ = scratch.data() + k_;
      for (int64_t n = 0; n < row.nnz; ++n) {
        const float x = row.val[n] * inv_n;
        const int64_t base = int64_t{row.idx[n]} * k_;
        for (int c = 0; c < k_; ++c) grad[base + c] += x * ds_[c] + (l2_ != 0.0f ? inv_n * l2_ * params[base + c] : 0.0f);
      }
      for (int c = 0; c < k_; ++c) grad[bias_offset() + c] += inv_n * ds_[c];
    }
  }
  if (correct) *correct = right;
  return examples.empty() ? 0.0 : total / static_cast<double>(examples.size());
}

}  // namespace dtrain
