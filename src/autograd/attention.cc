// autograd/attention.cc — causal self-attention forward and backward.
//
// Algorithm, per batch element b and head h (Q, K, V are seq x hd views into qkv; no copies:
// the gemms read them with row stride 3D, and write the output with row stride D):
//   forward   S = Q K^T * s            (s = 1/sqrt(hd); one gemm)
//             P = row softmax of S over keys t' <= t, P[t][t'] = 0 for t' > t
//             O = P V                  (one gemm into the output's columns of head h)
//   backward  given dO:
//             dV = P^T dO              dP = dO V^T
//             dS = P * (dP - rowsum(dP * P))     (softmax backward; masked entries stay 0)
//             dQ = s dS K              dK = s dS^T Q
// All four backward products are gemms; dQ, dK, dV land in the q/k/v column blocks of qkv's
// gradient, with beta = 1 when the graph accumulates into it.
#include "autograd/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/op_util.h"
#include "base/error.h"
#include "base/thread_pool.h"
#include "tensor/blas.h"

namespace dtrain {
namespace {

// Runs fn(pair) for pair in [0, pairs), over the pool when there is one.
template <class F>
void for_pairs(ThreadPool* pool, int64_t pairs, F&& fn) {
  if (pool == nullptr || pool->size() == 1 || pairs == 1) {
    for (int64_t p = 0; p < pairs; ++p) fn(p);
    return;
  }
  pool->parallel_for(0, pairs, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p) fn(p);
  });
}

// In place over the seq x seq scores of one pair: causal softmax of every row.
void causal_softmax_rows(float* s, int64_t seq) {
  for (int64_t t = 0; t < seq; ++t) {
    float* row = s + t * seq;
    float mx = row[0];
    for (int64_t j = 1; j <= t; ++j) mx = std::max(mx, row[j]);
    double sum = 0;
    for (int64_t j = 0; j <= t; ++j) {
      row[j] = std::exp(row[j] - mx);
      sum += row[j];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j <= t; ++j) row[j] *= inv;
    for (int64_t j = t + 1; j < seq; ++j) row[j] = 0.0f;
  }
}

}  // namespace

Var causal_attention(const Var& qkv, int64_t batch, int64_t seq, int64_t heads) {
  Graph& g = detail::graph_of({&qkv}, "causal_attention");
  Tensor X = qkv.value().contiguous();
  DT_CHECK(batch > 0 && seq > 0 && heads > 0, InvalidArgument,
           "causal_attention: batch " << batch << ", seq " << seq << ", heads " << heads << " must be positive");
  DT_CHECK(X.ndim() == 2 && X.dim(0) == batch * seq && X.dim(1) % (3 * heads) == 0, InvalidArgument,
           "causal_attention: qkv " << shape_str(X.shape()) << " must be [" << batch * seq << ", 3 * heads * hd] with "
                                    << heads << " heads (batch " << batch << " x seq " << seq << ")");
  const int64_t d = X.dim(1) / 3, hd = d / heads, ld = 3 * d;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  Tensor out = Tensor::empty({batch * seq, d});
  Tensor probs = Tensor::empty({batch * heads, seq, seq});
  const float* x = X.data();
  float* o = out.data();
  float* pr = probs.data();
  for_pairs(g.pool(), batch * heads, [&](int64_t pair) {
    const int64_t b = pair / heads, h = pair % heads;
    const float* q = x + b * seq * ld + h * hd;
    const float* k = q + d;
    const float* v = q + 2 * d;
    float* s = pr + pair * seq * seq;
    gemm(false, true, seq, seq, hd, scale, q, ld, k, ld, 0.0f, s, seq);  // (T, T)
    causal_softmax_rows(s, seq);
    gemm(false, false, seq, hd, seq, 1.0f, s, seq, v, ld, 0.0f, o + b * seq * d + h * hd, d);  // (T, hd)
  });
  return g.make(out, {qkv.id()}, [X, probs, batch, seq, heads, d, hd, ld, scale](Graph& g, int self) {
    Tensor gy = g.grad(self).contiguous();
    detail::write_grad(g, g.inputs(self)[0], [&](Tensor& sink, bool acc) {
      const float beta = acc ? 1.0f : 0.0f;
      const float* x = X.data();
      const float* dout = gy.data();
      const float* pr = probs.data();
      float* dx = sink.data();
      for_pairs(g.pool(), batch * heads, [&](int64_t pair) {
        const int64_t b = pair / heads, h = pair % heads;
        const int64_t base = b * seq * ld + h * hd;
        const float *q = x + base, *k = q + d, *v = q + 2 * d;
        float *dq = dx + base, *dk = dq + d, *dv = dq + 2 * d;
        const float* p = pr + pair * seq * seq;
        const float* dO = dout + b * seq * d + h * hd;
        std::vector<float> ds(static_cast<size_t>(seq * seq));
        gemm(true, false, seq, hd, seq, 1.0f, p, seq, dO, d, beta, dv, ld);            // dV = P^T dO
        gemm(false, true, seq, seq, hd, 1.0f, dO, d, v, ld, 0.0f, ds.data(), seq);     // dP = dO V^T
        for (int64_t t = 0; t < seq; ++t) {
          const float* prow = p + t * seq;
          float* drow = ds.data() + t * seq;
          double dot = 0;
          for (int64_t j = 0; j <= t; ++j) dot += static_cast<double>(prow[j]) * drow[j];
          const float fdot = static_cast<float>(dot);
          for (int64_t j = 0; j <= t; ++j) drow[j] = prow[j] * (drow[j] - fdot);
          for (int64_t j = t + 1; j < seq; ++j) drow[j] = 0.0f;
        }
        gemm(false, false, seq, hd, seq, scale, ds.data(), seq, k, ld, beta, dq, ld);  // dQ = s dS K
        gemm(true, false, seq, hd, seq, scale, ds.data(), seq, q, ld, beta, dk, ld);   // dK = s dS^T Q
      });
    });
  });
}

}  // namespace dtrain
