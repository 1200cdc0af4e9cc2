#include "plan/closed_forms.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace dtrain::plan {
namespace {
double lg(int p) { return std::ceil(std::log2(std::max(p, 1))); }
}  // namespace

// Ring all-reduce: a reduce-scatter (p-1 steps, each moving and reducing n/p bytes) then an
// all-gather (p-1 steps moving n/p bytes): bandwidth-optimal, latency linear in p.
double ring_allreduce_s(int p, double n, const CostParams& c) {
  if (p <= 1) return 0;
  double frac = (p - 1.0) / p;
  return 2 * (p - 1) * c.alpha_s + 2 * frac * n * c.beta_s_per_byte + frac * n * c.gamma_s_per_byte;
}

// Tree: a binomial reduce to the root (L rounds of the whole buffer, reduced at each) and a
// binomial broadcast back: latency logarithmic, every round moves all n bytes.
double tree_allreduce_s(int p, double n, const CostParams& c) {
  if (p <= 1) return 0;
  double L = lg(p);
  return 2 * L * (c.alpha_s + n * c.beta_s_per_byte) + L * n * c.gamma_s_per_byte;
}

// Recursive doubling: L rounds of exchanging and reducing the whole buffer with a partner.
double recursive_doubling_allreduce_s(int p, double n, const CostParams& c) {
  if (p <= 1) return 0;
  return lg(p) * (c.alpha_s + n * c.beta_s_per_byte + n * c.gamma_s_per_byte);
}

// Rabenseifner: recursive halving reduce-scatter then recursive doubling all-gather: the
// ring's bandwidth term with a logarithmic latency term.
double halving_doubling_allreduce_s(int p, double n, const CostParams& c) {
  if (p <= 1) return 0;
  double frac = (p - 1.0) / p;
  return 2 * lg(p) * c.alpha_s + 2 * frac * n * c.beta_s_per_byte + frac * n * c.gamma_s_per_byte;
}

double ring_reduce_scatter_s(int p, double n, const CostParams& c) {
  if (p <= 1) return 0;
  return (p - 1) * c.alpha_s + (p - 1.0) / p * n * (c.beta_s_per_byte + c.gamma_s_per_byte);
}

double ring_allgather_s(int p, double n, const CostParams& c) {
  if (p <= 1) return 0;
  return (p - 1) * c.alpha_s + (p - 1.0) / p * n * c.beta_s_per_byte;
}

// Hierarchical: inside each node the g ranks reduce-scatter (each ends with n/g reduced
// bytes), the nodes all-reduce their n/g slices over the slow links, and each node
// all-gathers the result; only n/g bytes per rank cross the node boundary.
double hierarchical_allreduce_s(int nodes, int per_node, double n, const CostParams& intra, const CostParams& inter) {
  per_node = std::max(per_node, 1);
  return ring_reduce_scatter_s(per_node, n, intra) + ring_allreduce_s(nodes, n / per_node, inter) +
         ring_allgather_s(per_node, n, intra);
}

double best_allreduce_s(int p, double n, const CostParams& c) {
  return std::min({ring_allreduce_s(p, n, c), tree_allreduce_s(p, n, c), halving_doubling_allreduce_s(p, n, c)});
}

// ZeRO: each stage moves one more of the three per-parameter states from "every rank holds
// all of it" to "every rank holds 1/N of it".
ZeroBytes zero_bytes(int stage, double P, int n, double w, double gr, double k) {
  DT_CHECK(stage >= 0 && stage <= 3, InvalidArgument, "ZeRO stage must be 0..3, got " << stage);
  DT_CHECK(n >= 1, InvalidArgument, "ZeRO needs n >= 1 data-parallel ranks, got " << n);
  ZeroBytes z;
  z.weights = w * P / (stage >= 3 ? n : 1);
  z.grads = gr * P / (stage >= 2 ? n : 1);
  z.optimizer = k * P / (stage >= 1 ? n : 1);
  return z;
}

double zero_traffic_elems(int stage, double P, int n) {
  if (n <= 1) return 0;
  return (stage >= 3 ? 3.0 : 2.0) * P * (n - 1.0) / n;
}

// The tensors a block keeps for backward (fp32 elements, no dropout), sbh units:
//   replicated across a tensor-parallel group: ln1 input, qkv input (ln1 output), ln2 input,
//   fc input (ln2 output)                                                        4 sbh
//   split over t: q, k, v (3), the attention output entering proj (1), the fc output
//   entering gelu (4) and the gelu output entering proj (4)                       12 sbh / t
//   the softmax probabilities, one s x s matrix per head and item                 a s^2 b / t
// With full recompute a block keeps only its input and recomputes the rest in backward.
double block_activation_elems(int64_t s, int64_t b, int64_t h, int64_t a, int t, bool recompute) {
  double sbh = static_cast<double>(s) * b * h;
  if (recompute) return sbh;
  t = std::max(t, 1);
  return 4 * sbh + (12 * sbh + static_cast<double>(a) * s * s * b) / t;
}

double korthikanti_bytes(int64_t s, int64_t b, int64_t h, int64_t a) {
  double sbh = static_cast<double>(s) * b * h;
  return sbh * (34.0 + 5.0 * a * s / h);
}

double bubble_fraction(const std::string& schedule, int p, int m, int v) {
  DT_CHECK(p >= 1 && m >= 1 && v >= 1, InvalidArgument, "bubble needs p, m, v >= 1");
  if (schedule == "interleaved") {
    double r = (p - 1.0) / (static_cast<double>(m) * v);
    return r / (1 + r);
  }
  DT_CHECK(schedule == "gpipe" || schedule == "1f1b", InvalidArgument,
           "unknown schedule '" << schedule << "' (gpipe, 1f1b, interleaved)");
  return (p - 1.0) / (m + p - 1.0);
}

double amdahl_speedup(double s, double n) { return 1.0 / (s + (1 - s) / n); }
double gustafson_speedup(double s, double n) { return n - s * (n - 1); }

// Amdahl: 1/S = s + (1-s)/N, i.e. (1/S - 1/N) = s (1 - 1/N): least squares through the origin.
double fit_amdahl(const std::vector<std::pair<double, double>>& pts) {
  double num = 0, den = 0;
  for (auto [n, sp] : pts) {
    DT_CHECK(n >= 1 && sp > 0, InvalidArgument, "fit_amdahl: point (N=" << n << ", S=" << sp << ") is invalid");
    double x = 1 - 1 / n, y = 1 / sp - 1 / n;
    num += x * y, den += x * x;
  }
  DT_CHECK(den > 0, InvalidArgument, "fit_amdahl needs a point with N > 1");
  return std::clamp(num / den, 0.0, 1.0);
}

// Gustafson: N - S = s (N - 1): least squares through the origin.
double fit_gustafson(const std::vector<std::pair<double, double>>& pts) {
  double num = 0, den = 0;
  for (auto [n, sp] : pts) {
    DT_CHECK(n >= 1 && sp > 0, InvalidArgument, "fit_gustafson: point (N=" << n << ", S=" << sp << ") is invalid");
    num += (n - 1) * (n - sp), den += (n - 1) * (n - 1);
  }
  DT_CHECK(den > 0, InvalidArgument, "fit_gustafson needs a point with N > 1");
  return std::clamp(num / den, 0.0, 1.0);
}

std::optional<std::pair<double, double>> fit_two_through_origin(double x11, double x12, double x22, double x1y, double x2y,
                                                                double min_independence) {
  const double det = x11 * x22 - x12 * x12;
  if (x11 <= 0 || x22 <= 0 || det <= min_independence * x11 * x22) return std::nullopt;
  return std::pair{(x1y * x22 - x2y * x12) / det, (x2y * x11 - x1y * x12) / det};
}

}  // namespace dtrain::plan
