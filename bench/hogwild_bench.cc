// HOGWILD! micro-benchmark: examples/s of one epoch of per-example sparse SGD on a synthetic
// LIBSVM-like problem (100k rows, 20k features, 20 nonzeros per row), for the lock-free
// scheme, the locking baseline and hogwild-hot at 1, 2 and 4 threads. Real-data numbers are in
// docs/ACCURACY.md (bench/hogwild_scaling.sh).
//
//   build-train/bin/hogwild_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <numeric>
#include <optional>

#include "data/rng.h"
#include "data/sampler.h"
#include "parallel/hogwild.h"
#include "parallel/hogwild_hot.h"

namespace {

const dtrain::data::Dataset& problem() {
  static const dtrain::data::Dataset ds = [] {
    dtrain::data::Rng rng(1);
    dtrain::data::Dataset d;
    d.source = "synthetic";
    d.sparse = true;
    d.rows = 100000;
    d.cols = 20000;
    d.num_classes = 2;
    d.label_values = {-1, 1};
    d.row_ptr.push_back(0);
    for (int64_t i = 0; i < d.rows; ++i) {
      std::vector<int32_t> cols;
      for (int k = 0; k < 20; ++k) cols.push_back(static_cast<int32_t>(rng.below(20000)));
      std::sort(cols.begin(), cols.end());
      cols.erase(std::unique(cols.begin(), cols.end()), cols.end());
      double score = 0;
      for (int32_t c : cols) {
        d.col_idx.push_back(c);
        d.values.push_back(1.0f);
        score += (c % 7 < 3) ? 1.0 : -0.8;
      }
      d.labels.push_back(score > 0 ? 1 : 0);
      d.row_ptr.push_back(static_cast<int64_t>(d.col_idx.size()));
    }
    return d;
  }();
  return ds;
}

// mode: a Hogwild mode, or nullopt for hogwild-hot with its defaults.
void run(benchmark::State& state, std::optional<dtrain::Hogwild::Mode> mode) {
  const auto& ds = problem();
  auto model = dtrain::make_sparse_model(dtrain::SparseLoss::kLogistic, ds);
  float lr = 0.05f;
  const int threads = static_cast<int>(state.range(0));
  std::unique_ptr<dtrain::ModelStrategy> strategy;
  if (mode) {
    strategy = std::make_unique<dtrain::Hogwild>(*model, &lr, threads, *mode);
  } else {
    dtrain::HogwildHotOptions o;
    o.threads = threads;
    strategy = std::make_unique<dtrain::HogwildHot>(*model, &lr, o);
  }
  dtrain::ModelStrategy& hw = *strategy;
  int64_t epoch = 0;
  double loss = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto order = dtrain::data::epoch_permutation(ds.rows, 7, epoch++);
    state.ResumeTiming();
    loss = hw.run_epoch(order, 1, nullptr).loss;
  }
  state.counters["examples/s"] = benchmark::Counter(static_cast<double>(ds.rows) * static_cast<double>(state.iterations()),
                                                    benchmark::Counter::kIsRate);
  state.counters["loss"] = loss;
}

void BM_HogwildLockFree(benchmark::State& s) { run(s, dtrain::Hogwild::Mode::kLockFree); }
void BM_HogwildLocked(benchmark::State& s) { run(s, dtrain::Hogwild::Mode::kLocked); }
void BM_HogwildHot(benchmark::State& s) { run(s, std::nullopt); }

BENCHMARK(BM_HogwildLockFree)->Arg(1)->Arg(2)->Arg(4)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_HogwildLocked)->Arg(1)->Arg(2)->Arg(4)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_HogwildHot)->Arg(1)->Arg(2)->Arg(4)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
