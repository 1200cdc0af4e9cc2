// autograd/ops_nn.cc — matmul, the fused linear layer, activations, softmax, layernorm,
// embedding and dropout with their backward rules.
#include <algorithm>
#include <cmath>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "base/thread_pool.h"
#include "tensor/kernels.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace dtrain {

using detail::graph_of;
using detail::write_grad;

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::kNone: return "none";
    case Activation::kRelu: return "relu";
    case Activation::kGelu: return "gelu";
    case Activation::kTanh: return "tanh";
    case Activation::kSigmoid: return "sigmoid";
  }
  return "?";
}

Activation parse_activation(const std::string& name) {
  for (Activation a : {Activation::kNone, Activation::kRelu, Activation::kGelu, Activation::kTanh, Activation::kSigmoid})
    if (name == activation_name(a)) return a;
  DT_THROW(InvalidArgument, "unknown activation '" << name << "' (expected none, relu, gelu, tanh or sigmoid)");
}

// C = op(A) op(B). With G = dC:
//   A not transposed: dA = G op(B)^T          A transposed: dA = op(B) G^T
//   B not transposed: dB = op(A)^T G          B transposed: dB = G^T op(A)
// Each is one gemm with flags; beta = 1 when accumulating.
Var matmul(const Var& a, const Var& b, bool ta, bool tb) {
  Graph& g = graph_of({&a, &b}, "matmul");
  Tensor out = dtrain::matmul(a.value(), b.value(), ta, tb);
  return g.make(out, {a.id(), b.id()}, [ta, tb](Graph& g, int self) {
    const Tensor& gy = g.grad(self);
    int ia = g.inputs(self)[0], ib = g.inputs(self)[1];
    const Tensor &A = g.value(ia), &B = g.value(ib);
    write_grad(g, ia, [&](Tensor& s, bool acc) {
      if (!ta) matmul_into(gy, B, s, false, !tb, 1.0f, acc ? 1.0f : 0.0f);
      else matmul_into(B, gy, s, tb, true, 1.0f, acc ? 1.0f : 0.0f);
    });
    write_grad(g, ib, [&](Tensor& s, bool acc) {
      if (!tb) matmul_into(A, gy, s, !ta, false, 1.0f, acc ? 1.0f : 0.0f);
      else matmul_into(gy, A, s, true, ta, 1.0f, acc ? 1.0f : 0.0f);
    });
  });
}

namespace {
// Applies `act` in place to z (contiguous) with the kernel table.
void activate_inplace(Tensor& z, Activation act, ThreadPool* pool) {
  if (act == Activation::kNone) return;
  const Kernels& k = kernels();
  auto fn = act == Activation::kRelu ? k.relu : act == Activation::kGelu ? k.gelu : act == Activation::kTanh ? k.tanh : k.sigmoid;
  float* p = z.data();
  int64_t n = z.numel();
  if (pool == nullptr || pool->size() == 1 || n < (1 << 16)) {
    fn(p, p, n);
    return;
  }
  pool->parallel_for(0, n, 1 << 15, [&](int64_t lo, int64_t hi) { fn(p + lo, p + lo, hi - lo); });
}

// gz = gy * act'(.): relu/tanh/sigmoid need only the output y, gelu the pre-activation z.
Tensor activation_grad(const Tensor& gy, const Tensor& y, const Tensor& z, Activation act, ThreadPool* pool) {
  if (act == Activation::kNone) return gy;
  const Kernels& k = kernels();
  Tensor out = Tensor::empty(gy.shape());
  const float* src = act == Activation::kGelu ? z.data() : y.data();
  auto fn = act == Activation::kRelu ? k.relu_backward
            : act == Activation::kGelu ? k.gelu_backward
            : act == Activation::kTanh ? k.tanh_backward
                                       : k.sigmoid_backward;
  int64_t n = gy.numel();
  auto run = [&](int64_t lo, int64_t hi) { fn(src + lo, gy.data() + lo, out.data() + lo, hi - lo); };
  if (pool == nullptr || pool->size() == 1 || n < (1 << 16)) run(0, n);
  else pool->parallel_for(0, n, 1 << 15, run);
  return out;
}
// gz *= (y > 0), in place, split over the pool.
void relu_mask_inplace(const Tensor& y, Tensor& gz, ThreadPool* pool) {
  const float* py = y.data();
  float* pg = gz.data();
  int64_t n = gz.numel();
  auto run = [&](int64_t lo, int64_t hi) { kernels().relu_backward(py + lo, pg + lo, pg + lo, hi - lo); };
  if (pool == nullptr || pool->size() == 1 || n < (1 << 16)) run(0, n);
  else pool->parallel_for(0, n, 1 << 15, run);
}
}  // namespace

// Fused fully connected layer (B, in) -> (B, out):
//   forward   z = x w^T (+ b)   one gemm with w transposed in place (no copy), then bias and
//             activation in one pass over z (add_relu for ReLU);
//   backward  gz = gy * act'(z); db = column sums of gz; dw = gz^T x; dx = gz w — two more
//             gemms, the first input's dx is skipped when x needs no gradient (the batch).
Var linear(const Var& x, const Var& w, const Var& bias, Activation act) {
  Graph& g = graph_of({&x, &w, &bias}, "linear");
  const Tensor &X = x.value(), &W = w.value();
  DT_CHECK(X.ndim() == 2 && W.ndim() == 2 && X.dim(1) == W.dim(1), InvalidArgument,
           "linear: input " << shape_str(X.shape()) << " does not match weight " << shape_str(W.shape())
                            << " (need input [B, in] and weight [out, in])");
  if (bias.defined())
    DT_CHECK(bias.value().ndim() == 1 && bias.value().dim(0) == W.dim(0), InvalidArgument,
             "linear: bias " << shape_str(bias.value().shape()) << " does not match weight " << shape_str(W.shape()));
  Tensor z = Tensor::empty({X.dim(0), W.dim(0)});
  matmul_into(X, W, z, false, true, 1.0f, 0.0f);
  Tensor pre;  // kept only for gelu backward
  if (act == Activation::kRelu && bias.defined()) {
    bias_add_relu_(z, bias.value(), g.pool());
  } else {
    if (bias.defined()) bias_add_(z, bias.value(), g.pool());
    if (act == Activation::kGelu && g.recording()) pre = z.clone();
    activate_inplace(z, act, g.pool());
  }
  std::vector<int> inputs = {x.id(), w.id(), bias.defined() ? bias.id() : -1};
  if (!bias.defined()) inputs.pop_back();
  return g.make(z, inputs, [act, pre](Graph& g, int self) {
    const std::vector<int>& in = g.inputs(self);
    // ReLU: mask the output gradient in place (no temporary); it is not read again.
    Tensor gz = g.grad(self);
    if (act == Activation::kRelu) relu_mask_inplace(g.value(self), gz, g.pool());
    else gz = activation_grad(gz, g.value(self), pre, act, g.pool());
    const Tensor &X = g.value(in[0]), &W = g.value(in[1]);
    if (in.size() > 2)
      write_grad(g, in[2], [&](Tensor& s, bool acc) { sum_rows_into(gz, s.data(), acc, g.pool()); });
    write_grad(g, in[1], [&](Tensor& s, bool acc) { matmul_into(gz, X, s, true, false, 1.0f, acc ? 1.0f : 0.0f); });
    write_grad(g, in[0], [&](Tensor& s, bool acc) { matmul_into(gz, W, s, false, false, 1.0f, acc ? 1.0f : 0.0f); });
  });
}

namespace {
Var unary_act(const Var& x, Activation act, const char* name) {
  Graph& g = graph_of({&x}, name);
  Tensor z = x.value().clone();
  activate_inplace(z, act, g.pool());
  return g.make(z, {x.id()}, [act](Graph& g, int self) {
    int ix = g.inputs(self)[0];
    g.accumulate_grad(ix, activation_grad(g.grad(self), g.value(self), g.value(ix).contiguous(), act, g.pool()));
  });
}
}  // namespace

Var relu(const Var& x) { return unary_act(x, Activation::kRelu, "relu"); }
Var gelu(const Var& x) { return unary_act(x, Activation::kGelu, "gelu"); }
Var tanh(const Var& x) { return unary_act(x, Activation::kTanh, "tanh"); }
Var sigmoid(const Var& x) { return unary_act(x, Activation::kSigmoid, "sigmoid"); }
Var activate(const Var& x, Activation act) { return act == Activation::kNone ? x : unary_act(x, act, activation_name(act)); }

// softmax backward per row: gx = y * (gy - <gy, y>)
Var softmax(const Var& x) {
  Graph& g = graph_of({&x}, "softmax");
  Tensor y = dtrain::softmax(x.value(), g.pool());
  return g.make(y, {x.id()}, [](Graph& g, int self) {
    const Tensor &y = g.value(self), &gy = g.grad(self);
    int64_t c = y.dim(-1), rows = y.numel() / std::max<int64_t>(c, 1);
    Tensor gx = Tensor::empty(y.shape());
    const Kernels& k = kernels();
    for (int64_t r = 0; r < rows; ++r) {
      const float *yr = y.data() + r * c, *gr = gy.data() + r * c;
      float d = k.dot(yr, gr, c);
      float* o = gx.data() + r * c;
      for (int64_t j = 0; j < c; ++j) o[j] = yr[j] * (gr[j] - d);
    }
    g.accumulate_grad(g.inputs(self)[0], gx);
  });
}

// log-softmax backward per row: gx = gy - softmax(x) * sum(gy), softmax = exp(y)
Var log_softmax(const Var& x) {
  Graph& g = graph_of({&x}, "log_softmax");
  Tensor y = dtrain::log_softmax(x.value(), g.pool());
  return g.make(y, {x.id()}, [](Graph& g, int self) {
    const Tensor &y = g.value(self), &gy = g.grad(self);
    int64_t c = y.dim(-1), rows = y.numel() / std::max<int64_t>(c, 1);
    Tensor gx = Tensor::empty(y.shape());
    const Kernels& k = kernels();
    for (int64_t r = 0; r < rows; ++r) {
      const float *yr = y.data() + r * c, *gr = gy.data() + r * c;
      float s = k.sum(gr, c);
      float* o = gx.data() + r * c;
      k.exp(yr, o, c);
      for (int64_t j = 0; j < c; ++j) o[j] = gr[j] - o[j] * s;
    }
    g.accumulate_grad(g.inputs(self)[0], gx);
  });
}

// Per row of C: mu = mean(x), rstd = 1/sqrt(var + eps), xhat = (x - mu) rstd,
// y = xhat gamma + beta. Backward with dxhat = gy gamma:
//   dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)); dgamma = sum_rows gy xhat;
//   dbeta = sum_rows gy.
Var layernorm(const Var& x, const Var& gamma, const Var& beta, float eps) {
  Graph& g = graph_of({&x, &gamma, &beta}, "layernorm");
  Tensor X = x.value().contiguous();
  int64_t c = X.dim(-1), rows = X.numel() / std::max<int64_t>(c, 1);
  DT_CHECK(gamma.value().shape() == Shape{c} && beta.value().shape() == Shape{c}, InvalidArgument,
           "layernorm: gamma " << shape_str(gamma.value().shape()) << " / beta " << shape_str(beta.value().shape())
                               << " must be [" << c << "] for input " << shape_str(X.shape()));
  Tensor xhat = Tensor::empty(X.shape()), rstd = Tensor::empty({rows}), y = Tensor::empty(X.shape());
  const float *gm = gamma.value().data(), *bt = beta.value().data();
  detail::parallel_rows(g.pool(), rows, c, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const float* xr = X.data() + r * c;
      double mu = 0, var = 0;
      for (int64_t j = 0; j < c; ++j) mu += xr[j];
      mu /= c;
      for (int64_t j = 0; j < c; ++j) var += (xr[j] - mu) * (xr[j] - mu);
      var /= c;
      float rs = static_cast<float>(1.0 / std::sqrt(var + eps));
      rstd.data()[r] = rs;
      float* h = xhat.data() + r * c;
      float* yr = y.data() + r * c;
      for (int64_t j = 0; j < c; ++j) {
        h[j] = static_cast<float>(xr[j] - mu) * rs;
        yr[j] = h[j] * gm[j] + bt[j];
      }
    }
  });
  return g.make(y, {x.id(), gamma.id(), beta.id()}, [xhat, rstd, c, rows](Graph& g, int self) {
    const Tensor& gy = g.grad(self);
    const std::vector<int>& in = g.inputs(self);
    const float* gm = g.value(in[1]).data();
    write_grad(g, in[0], [&](Tensor& s, bool acc) {
      detail::parallel_rows(g.pool(), rows, c, [&](int64_t lo, int64_t hi) {
        std::vector<float> dxh(c);
        for (int64_t r = lo; r < hi; ++r) {
          const float *gr = gy.data() + r * c, *h = xhat.data() + r * c;
          double m1 = 0, m2 = 0;
          for (int64_t j = 0; j < c; ++j) {
            dxh[j] = gr[j] * gm[j];
            m1 += dxh[j];
            m2 += dxh[j] * h[j];
          }
          m1 /= c;
          m2 /= c;
          float rs = rstd.data()[r];
          float* o = s.data() + r * c;
          for (int64_t j = 0; j < c; ++j) {
            float v = rs * static_cast<float>(dxh[j] - m1 - h[j] * m2);
            o[j] = acc ? o[j] + v : v;
          }
        }
      });
    });
    // dgamma = column sums of gy * xhat.
    write_grad(g, in[1], [&](Tensor& s, bool acc) { sum_rows_into(dtrain::mul(gy, xhat, g.pool()), s.data(), acc, g.pool()); });
    write_grad(g, in[2], [&](Tensor& s, bool acc) { sum_rows_into(gy, s.data(), acc, g.pool()); });
  });
}

// out[i] = table[idx[i]]; backward scatters gy rows back (adding for repeated indices).
Var embedding(const Var& table, std::span<const int32_t> indices) {
  Graph& g = graph_of({&table}, "embedding");
  const Tensor& T = table.value();
  DT_CHECK(T.ndim() == 2, InvalidArgument, "embedding: table must be [V, D], got " << shape_str(T.shape()));
  int64_t v = T.dim(0), d = T.dim(1), n = static_cast<int64_t>(indices.size());
  std::vector<int32_t> idx(indices.begin(), indices.end());
  for (int64_t i = 0; i < n; ++i)
    DT_CHECK(idx[i] >= 0 && idx[i] < v, InvalidArgument,
             "embedding: index " << idx[i] << " at position " << i << " is outside [0, " << v << ")");
  Tensor Tc = T.contiguous();
  Tensor out = Tensor::empty({n, d});
  for (int64_t i = 0; i < n; ++i) std::copy_n(Tc.data() + idx[i] * d, d, out.data() + i * d);
  return g.make(out, {table.id()}, [idx = std::move(idx), d](Graph& g, int self) {
    const Tensor& gy = g.grad(self);
    write_grad(g, g.inputs(self)[0], [&](Tensor& s, bool acc) {
      if (!acc) s.fill(0.0f);
      for (size_t i = 0; i < idx.size(); ++i) kernels().add(s.data() + idx[i] * d, gy.data() + i * d, s.data() + idx[i] * d, d);
    });
  });
}

// mask_i = (u_i >= p) / (1 - p) with u_i = hash_uniform(seed, i); out = x * mask.
Var dropout(const Var& x, float p, uint64_t seed) {
  DT_CHECK(p >= 0.0f && p < 1.0f, InvalidArgument, "dropout probability must be in [0, 1), got " << p);
  if (p == 0.0f) return x;
  Graph& g = graph_of({&x}, "dropout");
  Tensor X = x.value().contiguous();
  Tensor mask = Tensor::empty(X.shape());
  float keep = 1.0f / (1.0f - p);
  for (int64_t i = 0; i < X.numel(); ++i) mask.data()[i] = hash_uniform(seed, static_cast<uint64_t>(i)) >= p ? keep : 0.0f;
  Tensor out = dtrain::mul(X, mask, g.pool());
  return g.make(out, {x.id()}, [mask](Graph& g, int self) {
    g.accumulate_grad(g.inputs(self)[0], dtrain::mul(g.grad(self), mask, g.pool()));
  });
}

}  // namespace dtrain
