// tests/parallel/dist_test_util.h — helpers for the distributed-strategy tests: a small
// seeded dense problem, and "train S steps on M ranks (threads as ranks) and record every
// rank's parameters after every step".
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "data/dataset.h"
#include "data/rng.h"
#include "data/sampler.h"
#include "optim/optimizer.h"
#include "parallel/threads.h"
#include "parallel/threads_model.h"
#include "support/world.h"
#include "tensor/blas.h"

namespace dtrain::testing {

inline data::Dataset dense_blobs(int64_t n, int64_t d, int classes, uint64_t seed) {
  data::Rng rng(seed);
  data::Dataset ds;
  ds.source = "blobs";
  ds.rows = n;
  ds.cols = d;
  ds.num_classes = classes;
  for (int c = 0; c < classes; ++c) ds.label_values.push_back(c);
  for (int64_t i = 0; i < n; ++i) {
    const int y = static_cast<int>(rng.below(static_cast<uint64_t>(classes)));
    ds.labels.push_back(y);
    for (int64_t j = 0; j < d; ++j)
      ds.dense.push_back(static_cast<float>(rng.normal() * 0.5 + (j % classes == y ? 1.0 : 0.0)));
  }
  return ds;
}

// params_after[rank][step] = that rank's parameters after `step + 1` steps.
struct DistRun {
  std::vector<std::vector<std::vector<float>>> params_after;
  std::vector<LossAcc> epoch_stats;  // rank 0's run_epoch results
};

// Builds the strategy for one rank (model, its optimizer, the rank's communicator).
using MakeStrategy =
    std::function<std::unique_ptr<ModelStrategy>(TrainableModel&, Optimizer&, Communicator&)>;
// Steps one strategy once on a global batch (e.g. DataParallel::step).
using StepFn = std::function<void(ModelStrategy&, std::span<const int64_t>)>;

// Trains `steps` global minibatches of `batch` items of epoch 0's order on `ranks` ranks.
inline DistRun run_steps(int ranks, const data::Dataset& ds, const std::string& spec, const OptimizerConfig& oc,
                         int64_t batch, int steps, const MakeStrategy& make, const StepFn& step) {
  set_blas_threads(1);
  DistRun out;
  out.params_after.resize(static_cast<size_t>(ranks));
  const std::vector<int64_t> order = data::epoch_permutation(ds.rows, 7, 0);
  run_world(ranks, TransportKind::kShm, [&](Communicator& comm) {
    auto model = make_mlp_model(spec, ds, 3);
    auto opt = make_optimizer(oc, model->num_params());
    auto s = make(*model, *opt, comm);
    auto& mine = out.params_after[static_cast<size_t>(comm.rank())];
    for (int t = 0; t < steps; ++t) {
      std::span<const int64_t> b(order.data() + static_cast<size_t>(t) * static_cast<size_t>(batch),
                                 static_cast<size_t>(batch));
      step(*s, b);
      mine.emplace_back(model->params().begin(), model->params().end());
    }
  });
  return out;
}

inline float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace dtrain::testing
