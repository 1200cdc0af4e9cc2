// Compute-core benchmarks: the full MLP training step that the project measures itself by,
// plus the pieces it is made of (sgemm, element-wise kernels, optimizer update).
//
// The headline: MLP 784-1024-1024-1024-10, batch 256, cross-entropy, SGD lr 0.05 momentum
// 0.9, one thread (OpenBLAS set to 1 thread), synthetic data — the same model and step as
// /work/shared/peers/py/ddp_mlp.py "single 1" (PyTorch 1.13: 5,971 examples/s).
//   build-compute/bin/compute_bench --benchmark_filter='MlpTrainStep/batch:256/threads:1/ftz:0' 
// Counters: examples/s, and GFLOP/s counted as PyTorch's summary does (6 x multiply-adds per
// example: forward 2, backward 4) — "gflops_exact" leaves out the input gradient of layer 1,
// which is never computed.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <optional>
#include <vector>

#include "autograd/loss.h"
#include "cli/blas_core.h"
#include "base/heap_warm.h"
#include "base/thread_pool.h"
#include "nn/mlp.h"
#include "optim/sgd.h"
#include "tensor/blas.h"
#include "tensor/convert.h"
#include "tensor/denormals.h"
#include "tensor/kernels.h"
#include "tensor/random.h"

namespace dtrain {
namespace {

struct Batch {
  Tensor x;
  std::vector<int32_t> y;
};

Batch synthetic_batch(int64_t b, int64_t d, int64_t classes, uint64_t seed) {
  Batch out{Tensor::empty({b, d}), std::vector<int32_t>(b)};
  Rng rng(seed);
  rng.fill_normal(out.x.span(), 0.0f, 1.0f);
  for (auto& l : out.y) l = static_cast<int32_t>(rng.below(classes));
  return out;
}

void set_counters(benchmark::State& state, const MLP& model, int64_t batch) {
  double macs = static_cast<double>(model.macs_per_example());
  double exact = 6.0 * macs - 2.0 * model.dims()[0] * model.dims()[1];
  double n = static_cast<double>(state.iterations()) * batch;
  state.counters["examples_per_s"] = benchmark::Counter(n, benchmark::Counter::kIsRate);
  state.counters["gflops_3x"] = benchmark::Counter(n * 6.0 * macs / 1e9, benchmark::Counter::kIsRate);
  state.counters["gflops_exact"] = benchmark::Counter(n * exact / 1e9, benchmark::Counter::kIsRate);
}

// args: batch, threads (BLAS threads; the element-wise pool gets the same count), ftz (1:
// flush subnormals on this thread, see tensor/denormals.h). The "loss" counter is the last
// step's loss: the model memorizes the one synthetic batch, as PyTorch's benchmark does.
void mlp_train_step(benchmark::State& state, const char* spec, float lr) {
  int64_t batch = state.range(0);
  int threads = static_cast<int>(state.range(1));
  std::optional<FlushDenormals> ftz;
  if (state.range(2)) ftz.emplace();
  set_blas_threads(threads);
  ThreadPool pool(threads);
  MLP model(spec, {.seed = 0});
  Sgd opt(model.num_params(), {.lr = lr, .momentum = 0.9f});
  opt.set_pool(&pool);
  Batch data = synthetic_batch(batch, 784, 10, 1);
  float loss = 0;
  for (auto _ : state) {
    Graph g(&pool);
    Var l = cross_entropy(model.forward(g, data.x), data.y);
    g.backward(l);
    opt.step(model.param_span(), model.grad_span());
    loss = l.item();
  }
  benchmark::DoNotOptimize(loss);
  set_counters(state, model, batch);
  state.counters["loss"] = loss;
  state.SetLabel(std::string(isa_name(kernels().isa)));
}
void BM_MlpTrainStep(benchmark::State& state) { mlp_train_step(state, "784-1024-1024-1024-10", 0.05f); }
BENCHMARK(BM_MlpTrainStep)->ArgNames({"batch", "threads", "ftz"})->Args({256, 1, 0})->Args({256, 1, 1})
    ->Args({128, 1, 0})->Args({64, 1, 0})->Args({256, 2, 0})->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();
// The README's main job's step (scripts/main_defaults.sh: 784-256-128-10, momentum, lr 0.1):
// one process at batch 256 against two at 128 at once is that job's no-communication ceiling.
void BM_MainJobStep(benchmark::State& state) { mlp_train_step(state, "784-256-128-10", 0.1f); }
BENCHMARK(BM_MainJobStep)->ArgNames({"batch", "threads", "ftz"})->Args({256, 1, 0})->Args({128, 1, 0})
    ->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();

// Small models and tiny batches (HOGWILD!-style steps): measures per-op overhead of the
// graph, not the gemm. args: batch
// With ftz = 0 the memorized batch drives gradients into subnormals and the step slows
// down several-fold; ftz = 1 shows the cost without them.
void BM_SmallMlpStep(benchmark::State& state) {
  int64_t batch = state.range(0);
  std::optional<FlushDenormals> ftz;
  if (state.range(1)) ftz.emplace();
  set_blas_threads(1);
  MLP model("784-128-10", {.seed = 0});
  Sgd opt(model.num_params(), {.lr = 0.05f, .momentum = 0.9f});
  Batch data = synthetic_batch(batch, 784, 10, 1);
  for (auto _ : state) {
    benchmark::DoNotOptimize(model.loss_and_grad(data.x, data.y));
    opt.step(model.param_span(), model.grad_span());
  }
  set_counters(state, model, batch);
}
BENCHMARK(BM_SmallMlpStep)->ArgNames({"batch", "ftz"})->Args({1, 0})->Args({1, 1})->Args({16, 0})->Args({16, 1})
    ->Unit(benchmark::kMicrosecond)->UseRealTime();

// Forward + backward only (PyTorch "fwdbwd").
void BM_MlpFwdBwd(benchmark::State& state) {
  int64_t batch = state.range(0);
  set_blas_threads(1);
  MLP model("784-1024-1024-1024-10", {.seed = 0});
  Batch data = synthetic_batch(batch, 784, 10, 1);
  for (auto _ : state) benchmark::DoNotOptimize(model.loss_and_grad(data.x, data.y));
  set_counters(state, model, batch);
}
BENCHMARK(BM_MlpFwdBwd)->ArgNames({"batch"})->Arg(256)->Arg(128)->Arg(64)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();

// The BLAS ceiling on this machine: C = A B and the two transposed shapes the step uses,
// through dtrain's gemm (impl 0: gemm_small where it takes the shape, tensor/gemm_small.h)
// and straight to OpenBLAS (impl 1), in the same run.
void BM_Sgemm(benchmark::State& state) {
  int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  bool ta = state.range(3) != 0, tb = state.range(4) != 0, openblas = state.range(5) != 0;
  set_blas_threads(1);
  std::vector<float> a(m * k, 0.5f), b(k * n, 0.25f), c(m * n);
  const int64_t lda = ta ? m : k, ldb = tb ? k : n;
  for (auto _ : state) {
    if (openblas)
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
                  static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, a.data(), static_cast<blasint>(lda), b.data(),
                  static_cast<blasint>(ldb), 0.0f, c.data(), static_cast<blasint>(n));
    else
      gemm(ta, tb, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), n);
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * m * n * k * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}
void sgemm_shapes(benchmark::internal::Benchmark* b) {
  for (int impl : {0, 1}) {
    b->Args({1024, 1024, 1024, 0, 0, impl});
    // forward x w^T, weight gradient gz^T x, input gradient gz w: at one rank's batch of 256,
    // and at the per-rank batches of 2 and 4 ranks (128 and 64 rows); 512 and 1024 rows show
    // where gemm_small stops (or, against a narrower OpenBLAS, does not).
    for (int64_t rows : {1024, 512, 256, 128, 64})
      b->Args({rows, 1024, 1024, 0, 1, impl})->Args({1024, 1024, rows, 1, 0, impl})->Args({rows, 1024, 1024, 0, 0, impl});
  }
}
BENCHMARK(BM_Sgemm)->ArgNames({"m", "n", "k", "ta", "tb", "openblas"})->Apply(sgemm_shapes)
    ->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_KernelAddRelu(benchmark::State& state) {
  int64_t n = state.range(0);
  std::vector<float> a(n, 1.0f), b(n, -0.5f), o(n);
  for (auto _ : state) kernels().add_relu(a.data(), b.data(), o.data(), n);
  state.SetBytesProcessed(state.iterations() * n * 12);
}
BENCHMARK(BM_KernelAddRelu)->Arg(1 << 18);

void BM_KernelExp(benchmark::State& state) {
  int64_t n = state.range(0);
  std::vector<float> a(n, 0.3f), o(n);
  for (auto _ : state) kernels().exp(a.data(), o.data(), n);
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_KernelExp)->Arg(1 << 16);

void BM_SgdMomentumStep(benchmark::State& state) {
  int64_t n = state.range(0);
  std::vector<float> p(n, 1.0f), g(n, 0.01f);
  Sgd opt(n, {.lr = 0.05f, .momentum = 0.9f});
  for (auto _ : state) opt.step(p, g);
  state.SetBytesProcessed(state.iterations() * n * 20);
}
BENCHMARK(BM_SgdMomentumStep)->Arg(2913290)->Unit(benchmark::kMillisecond);

// Gradient compression for communication: 2.9 M floats (the benchmark model) to bf16 and back.
void BM_Bf16RoundTrip(benchmark::State& state) {
  int64_t n = state.range(0);
  std::vector<float> x(n, 1.2345f), back(n);
  std::vector<uint16_t> h(n);
  for (auto _ : state) {
    to_bf16(x, h);
    from_bf16(h, back);
  }
  state.SetBytesProcessed(state.iterations() * n * 12);
}
BENCHMARK(BM_Bf16RoundTrip)->Arg(2913290)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dtrain

// BENCHMARK_MAIN, after the CLI's first step: OpenBLAS on the kernels this CPU runs
// (cli/blas_core.h), or its rows measure a VM's fallback. The heap is kept as a training run
// keeps it (base/heap_warm.h): freed memory stays mapped, so a step's activations are not
// faulted in again every step.
int main(int argc, char** argv) {
  dtrain::run_again_with_better_blas_core(argv);
  dtrain::keep_heap_warm();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
