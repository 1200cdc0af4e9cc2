#include "plan/calibrate_compute.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "optim/optimizer.h"
#include "tensor/blas.h"

namespace dtrain::plan {
namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Best time of fn over repetitions filling about `seconds`.
template <class Fn>
double best_of(double seconds, Fn&& fn) {
  fn();
  double best = 1e300, start = now();
  int reps = 0;
  do {
    double t0 = now();
    fn();
    best = std::min(best, now() - t0);
    ++reps;
  } while ((now() - start < seconds && reps < 10000) || reps < 3);
  return best;
}

struct Shape {
  int64_t m, n, k;
};

double gemm_seconds(const Shape& s, double seconds) {
  std::vector<float> a(s.m * s.k, 0.5f), b(s.k * s.n, 0.25f), c(s.m * s.n);
  return best_of(seconds, [&] { gemm(false, false, s.m, s.n, s.k, 1.0f, a.data(), s.k, b.data(), s.n, 0.0f, c.data(), s.n); });
}

}  // namespace

ComputeRates measure_compute(double seconds) {
  ComputeRates r;
  r.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  set_blas_threads(1);
  const std::vector<Shape> shapes{{32, 256, 784}, {32, 128, 256}, {768, 384, 128}, {768, 512, 128},
                                  {768, 128, 512}, {768, 65, 128}};
  const double per = seconds / (shapes.size() + 4);
  std::vector<double> rates;
  for (const auto& s : shapes) {
    double g = 2.0 * s.m * s.n * s.k / gemm_seconds(s, per) / 1e9;
    r.gemm_by_shape.push_back({std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k), g});
    rates.push_back(g);
  }
  std::sort(rates.begin(), rates.end());
  r.gemm_gflops = rates[rates.size() / 2];

  // Element-wise: a = a * b + c touches 4 arrays' worth of bytes (3 reads, 1 write).
  const size_t n = 4u << 20;
  std::vector<float> a(n, 1.0f), b(n, 0.999f), c(n, 0.001f);
  double t = best_of(per, [&] {
    for (size_t i = 0; i < n; ++i) a[i] = a[i] * b[i] + c[i];
  });
  r.elementwise_gbps = 16.0 * n / t / 1e9;

  const int64_t P = 1 << 20;
  std::vector<float> params(P, 0.1f), grads(P, 0.01f);
  for (auto [kind, out] : {std::pair<const char*, double*>{"adamw", &r.adamw_ns_per_param}, {"sgd", &r.sgd_ns_per_param}}) {
    OptimizerConfig oc;
    oc.kind = kind;
    oc.momentum = 0.9f;
    oc.lr = 1e-4f;
    auto opt = make_optimizer(oc, P);
    *out = best_of(per, [&] { opt->step(params, grads); }) / P * 1e9;
  }

  // Oversubscription: 2 x cores threads, each a fixed number of the median-shape GEMMs.
  const Shape mid{768, 384, 128};
  const int iters = std::max(3, static_cast<int>(per / std::max(gemm_seconds(mid, per / 4), 1e-6)));
  auto run = [&](int threads) {
    double t0 = now();
    std::vector<std::thread> ts;
    for (int i = 0; i < threads; ++i)
      ts.emplace_back([&] {
        std::vector<float> x(mid.m * mid.k, 0.5f), y(mid.k * mid.n, 0.25f), z(mid.m * mid.n);
        for (int k = 0; k < iters; ++k)
          gemm(false, false, mid.m, mid.n, mid.k, 1.0f, x.data(), mid.k, y.data(), mid.n, 0.0f, z.data(), mid.n);
      });
    for (auto& th : ts) th.join();
    return now() - t0;
  };
  double one = run(1), over = run(2 * r.cores);
  r.oversub_penalty = std::max(1.0, over / (one * 2.0));
  return r;
}

nlohmann::json compute_json(const ComputeRates& r) {
  nlohmann::json shapes = nlohmann::json::object();
  for (const auto& [k, v] : r.gemm_by_shape) shapes[k] = v;
  return {{"version", 2},
          {"cores", r.cores},
          {"gemm_gflops", r.gemm_gflops},
          {"gemm_gflops_by_shape", shapes},
          {"elementwise_gbps", r.elementwise_gbps},
          {"optimizer_ns_per_param", r.adamw_ns_per_param},
          {"sgd_ns_per_param", r.sgd_ns_per_param},
          {"oversub_penalty", r.oversub_penalty}};
}

}  // namespace dtrain::plan
