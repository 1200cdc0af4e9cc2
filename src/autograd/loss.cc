// autograd/loss.cc — cross-entropy, MSE, logistic and hinge losses (batch means).
#include "autograd/loss.h"

#include <algorithm>
#include <cmath>

#include "autograd/op_util.h"
#include "base/thread_pool.h"
#include "tensor/kernels.h"
#include "tensor/ops.h"

namespace dtrain {

using detail::graph_of;
using detail::write_grad;

// Per row b with logits x: m = max x, s = sum exp(x - m), loss_b = m + log s - x[y_b].
// The probabilities p = exp(x - m) / s are kept for backward: dx = (p - onehot(y)) * gy / B.
Var cross_entropy(const Var& logits, std::span<const int32_t> labels) {
  Graph& g = graph_of({&logits}, "cross_entropy");
  Tensor X = logits.value().contiguous();
  DT_CHECK(X.ndim() == 2, InvalidArgument, "cross_entropy: logits must be [B, K], got " << shape_str(X.shape()));
  int64_t b = X.dim(0), k = X.dim(1);
  DT_CHECK(static_cast<int64_t>(labels.size()) == b, InvalidArgument,
           "cross_entropy: " << labels.size() << " labels for logits " << shape_str(X.shape()));
  std::vector<int32_t> y(labels.begin(), labels.end());
  for (int64_t i = 0; i < b; ++i)
    DT_CHECK(y[i] >= 0 && y[i] < k, InvalidArgument,
             "cross_entropy: label " << y[i] << " at position " << i << " is outside [0, " << k << ")");
  Tensor probs = Tensor::empty(X.shape());
  std::vector<double> row_loss(b);
  const Kernels& kn = kernels();
  auto rows = [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const float* xr = X.data() + i * k;
      float* pr = probs.data() + i * k;
      float m = kn.max(xr, k);
      float s = kn.exp_shift_sum(xr, m, pr, k);
      kn.scale(1.0f / s, pr, pr, k);
      row_loss[i] = static_cast<double>(m) + std::log(static_cast<double>(s)) - xr[y[i]];
    }
  };
  if (g.pool() && g.pool()->size() > 1 && b * k >= (1 << 15)) g.pool()->parallel_for(0, b, 16, rows);
  else rows(0, b);
  double total = 0;
  for (double l : row_loss) total += l;
  Tensor out = Tensor::scalar(b > 0 ? static_cast<float>(total / b) : 0.0f);
  return g.make(out, {logits.id()}, [probs, y = std::move(y), b, k](Graph& g, int self) {
    float scale = g.grad(self).item() / static_cast<float>(std::max<int64_t>(b, 1));
    write_grad(g, g.inputs(self)[0], [&](Tensor& s, bool acc) {
      for (int64_t i = 0; i < b; ++i) {
        const float* pr = probs.data() + i * k;
        float* o = s.data() + i * k;
        if (acc) kernels().axpy(scale, pr, o, k);
        else kernels().scale(scale, pr, o, k);
        o[y[i]] -= scale;
      }
    });
  });
}

// mean (pred - target)^2; d pred = 2 (pred - target) / N.
Var mse_loss(const Var& pred, const Tensor& target) {
  Graph& g = graph_of({&pred}, "mse_loss");
  DT_CHECK(pred.value().shape() == target.shape(), InvalidArgument,
           "mse_loss: prediction " << shape_str(pred.value().shape()) << " vs target " << shape_str(target.shape()));
  Tensor diff = dtrain::sub(pred.value(), target, g.pool());
  int64_t n = diff.numel();
  DT_CHECK(n > 0, InvalidArgument, "mse_loss of empty tensors");
  Tensor out = Tensor::scalar(static_cast<float>(sumsq(diff.span(), g.pool()) / static_cast<double>(n)));
  return g.make(out, {pred.id()}, [diff, n](Graph& g, int self) {
    float scale = 2.0f * g.grad(self).item() / static_cast<float>(n);
    write_grad(g, g.inputs(self)[0], [&](Tensor& s, bool acc) {
      if (acc) kernels().axpy(scale, diff.data(), s.data(), n);
      else kernels().scale(scale, diff.data(), s.data(), n);
    });
  });
}

namespace {
// Scores must be (B) or (B, 1); labels {0, 1} or {-1, +1} become +-1.
std::vector<float> signed_labels(const Tensor& scores, std::span<const float> labels, const char* op) {
  DT_CHECK(scores.ndim() == 1 || (scores.ndim() == 2 && scores.dim(1) == 1), InvalidArgument,
           op << ": scores must be [B] or [B, 1], got " << shape_str(scores.shape()));
  DT_CHECK(static_cast<int64_t>(labels.size()) == scores.dim(0), InvalidArgument,
           op << ": " << labels.size() << " labels for scores " << shape_str(scores.shape()));
  std::vector<float> y(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    float l = labels[i];
    DT_CHECK(l == 0.0f || l == 1.0f || l == -1.0f, InvalidArgument,
             op << ": label " << l << " at position " << i << " is not 0, 1 or -1");
    y[i] = l == 1.0f ? 1.0f : -1.0f;
  }
  return y;
}
}  // namespace

// mean softplus(-y s), softplus(z) = max(z, 0) + log1p(exp(-|z|)); ds = -y sigmoid(-y s) / B.
Var logistic_loss(const Var& scores, std::span<const float> labels) {
  Graph& g = graph_of({&scores}, "logistic_loss");
  Tensor S = scores.value().contiguous();
  std::vector<float> y = signed_labels(S, labels, "logistic_loss");
  int64_t b = S.dim(0);
  double total = 0;
  for (int64_t i = 0; i < b; ++i) {
    double z = -static_cast<double>(y[i]) * S.data()[i];
    total += std::max(z, 0.0) + std::log1p(std::exp(-std::fabs(z)));
  }
  Tensor out = Tensor::scalar(b > 0 ? static_cast<float>(total / b) : 0.0f);
  return g.make(out, {scores.id()}, [S, y = std::move(y), b](Graph& g, int self) {
    float gy = g.grad(self).item() / static_cast<float>(std::max<int64_t>(b, 1));
    write_grad(g, g.inputs(self)[0], [&](Tensor& s, bool acc) {
      for (int64_t i = 0; i < b; ++i) {
        double z = -static_cast<double>(y[i]) * S.data()[i];
        float v = static_cast<float>(-y[i] * (1.0 / (1.0 + std::exp(-z)))) * gy;
        s.data()[i] = acc ? s.data()[i] + v : v;
      }
    });
  });
}

// mean max(0, 1 - y s); ds = -y / B where the margin is violated.
Var hinge_loss(const Var& scores, std::span<const float> labels) {
  Graph& g = graph_of({&scores}, "hinge_loss");
  Tensor S = scores.value().contiguous();
  std::vector<float> y = signed_labels(S, labels, "hinge_loss");
  int64_t b = S.dim(0);
  double total = 0;
  for (int64_t i = 0; i < b; ++i) total += std::max(0.0, 1.0 - static_cast<double>(y[i]) * S.data()[i]);
  Tensor out = Tensor::scalar(b > 0 ? static_cast<float>(total / b) : 0.0f);
  return g.make(out, {scores.id()}, [S, y = std::move(y), b](Graph& g, int self) {
    float gy = g.grad(self).item() / static_cast<float>(std::max<int64_t>(b, 1));
    write_grad(g, g.inputs(self)[0], [&](Tensor& s, bool acc) {
      for (int64_t i = 0; i < b; ++i) {
        float v = 1.0f - y[i] * S.data()[i] > 0.0f ? -y[i] * gy : 0.0f;
        s.data()[i] = acc ? s.data()[i] + v : v;
      }
    });
  });
}

float accuracy(const Tensor& logits, std::span<const int32_t> labels) {
  std::vector<int32_t> pred = argmax_rows(logits);
  DT_CHECK(pred.size() == labels.size(), InvalidArgument,
           "accuracy: " << labels.size() << " labels for logits " << shape_str(logits.shape()));
  if (pred.empty()) return 0.0f;
  int64_t hit = 0;
  for (size_t i = 0; i < pred.size(); ++i) hit += pred[i] == labels[i];
  return static_cast<float>(hit) / static_cast<float>(pred.size());
}

}  // namespace dtrain
