// The threads strategy: identical parameters, bit for bit, for T = 1, 2, 4 on a dense MLP and
// a sparse softmax model, and the same result as a plain one-replica SGD loop.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/error.h"
#include "data/rng.h"
#include "data/sampler.h"
#include "optim/optimizer.h"
#include "parallel/dist_test_util.h"
#include "parallel/threads.h"
#include "tensor/blas.h"

namespace dtrain {
namespace {

using testing::dense_blobs;

data::Dataset sparse_rows(int64_t n, int64_t d, int classes, uint64_t seed) {
  data::Rng rng(seed);
  data::Dataset ds;
  ds.source = "sparse";
  ds.sparse = true;
  ds.rows = n;
  ds.cols = d;
  ds.num_classes = classes;
  for (int c = 0; c < classes; ++c) ds.label_values.push_back(c);
  ds.row_ptr.push_back(0);
  for (int64_t i = 0; i < n; ++i) {
    const int y = static_cast<int>(rng.below(static_cast<uint64_t>(classes)));
    ds.labels.push_back(y);
    for (int64_t j = 0; j < d; ++j)
      if (rng.uniform() < 0.1 || j % classes == y) {
        ds.col_idx.push_back(static_cast<int32_t>(j));
        ds.values.push_back(static_cast<float>(rng.uniform()));
      }
    ds.row_ptr.push_back(static_cast<int64_t>(ds.col_idx.size()));
  }
  ds.validate();
  return ds;
}

struct TrainRun {
  std::vector<float> params;
  std::vector<double> losses;
};

TrainRun train(TrainableModel& model, int threads, const std::string& opt_kind, int64_t batch, int epochs) {
  OptimizerConfig oc;
  oc.kind = opt_kind;
  oc.lr = opt_kind == "sgd" ? 0.1f : 0.01f;
  oc.momentum = opt_kind == "sgd" ? 0.9f : 0.0f;
  auto opt = make_optimizer(oc, model.num_params());
  SyncThreads st(model, *opt, threads);
  TrainRun r;
  for (int e = 0; e < epochs; ++e) {
    auto order = data::epoch_permutation(model.train_set().rows, 9, e);
    r.losses.push_back(st.run_epoch(order, batch, nullptr).loss);
  }
  r.params.assign(model.params().begin(), model.params().end());
  return r;
}

TEST(Threads, MlpBitIdenticalForT124) {
  set_blas_threads(1);
  data::Dataset ds = dense_blobs(600, 12, 3, 4);
  std::vector<TrainRun> runs;
  for (int t : {1, 2, 4}) {
    auto model = make_mlp_model("12-16-3", ds, 5);
    runs.push_back(train(*model, t, "sgd", 50, 3));  // 600/50: full batches
  }
  // A final short batch (600 % 64 = 24) too, with Adam.
  for (int t : {1, 2, 4}) {
    auto model = make_mlp_model("12-16-3", ds, 5);
    runs.push_back(train(*model, t, "adam", 64, 2));
  }
  for (int i : {1, 2}) {
    EXPECT_EQ(runs[0].params, runs[static_cast<size_t>(i)].params) << "sgd T differs at run " << i;
    EXPECT_EQ(runs[0].losses, runs[static_cast<size_t>(i)].losses);
    EXPECT_EQ(runs[3].params, runs[static_cast<size_t>(3 + i)].params) << "adam T differs at run " << i;
  }
  EXPECT_LT(runs[0].losses.back(), runs[0].losses.front());  // it learned something
}

// Evaluation runs the master module for inference on every pool thread (no replica): the
// same loss and count on any pool, bit for bit, and the cross-entropy of its probabilities.
TEST(Threads, MlpEvaluationIsTheSameOnAnyPool) {
  data::Dataset ds = dense_blobs(2500, 12, 3, 7);  // three chunks of up to 1000 rows
  auto model = make_mlp_model("12-16-3", ds, 5);
  const LossAcc alone = model->evaluate(ds, nullptr);
  for (int t : {2, 3}) {
    ThreadPool pool(t);
    const LossAcc pooled = model->evaluate(ds, &pool);
    EXPECT_EQ(pooled.loss, alone.loss) << t << " threads";
    EXPECT_EQ(pooled.correct, alone.correct) << t << " threads";
    EXPECT_EQ(pooled.examples, 2500);
  }
  const std::vector<float> prob = model->probabilities(ds);
  double loss = 0;
  int64_t correct = 0;
  for (int64_t i = 0; i < ds.rows; ++i) {
    const float* row = prob.data() + i * 3;
    loss -= std::log(static_cast<double>(row[ds.labels[static_cast<size_t>(i)]]));
    correct += std::max_element(row, row + 3) - row == ds.labels[static_cast<size_t>(i)];
  }
  EXPECT_NEAR(alone.loss, loss / 2500, 1e-5);
  EXPECT_EQ(alone.correct, correct);
}

TEST(Threads, SparseSoftmaxBitIdenticalForT124) {
  data::Dataset ds = sparse_rows(500, 40, 4, 8);
  std::vector<TrainRun> runs;
  for (int t : {1, 2, 4}) {
    auto model = make_sparse_model(SparseLoss::kSoftmax, ds);
    runs.push_back(train(*model, t, "sgd", 37, 3));
  }
  EXPECT_EQ(runs[0].params, runs[1].params);
  EXPECT_EQ(runs[0].params, runs[2].params);
  EXPECT_LT(runs[0].losses.back(), runs[0].losses.front());
}

TEST(Threads, OneStepEqualsMeanGradientStep) {
  // One SGD step over a batch equals params - lr * (mean gradient from a single replica).
  data::Dataset ds = sparse_rows(64, 20, 2, 3);
  auto model = make_sparse_model(SparseLoss::kLogistic, ds);
  for (auto& p : model->params()) p = 0.01f;
  std::vector<float> start(model->params().begin(), model->params().end());
  std::vector<int64_t> batch(64);
  std::iota(batch.begin(), batch.end(), 0);
  std::vector<float> grad(static_cast<size_t>(model->num_params()));
  model->make_replica()->loss_grad(start, batch, grad);
  OptimizerConfig oc;
  oc.lr = 0.5f;
  auto opt = make_optimizer(oc, model->num_params());
  SyncThreads st(*model, *opt, 2);
  st.step(batch);
  for (size_t i = 0; i < start.size(); ++i) EXPECT_NEAR(model->params()[i], start[i] - 0.5f * grad[i], 1e-6f) << i;
}

TEST(Threads, RejectsBadArguments) {
  data::Dataset ds = sparse_rows(10, 5, 2, 1);
  auto model = make_sparse_model(SparseLoss::kLogistic, ds);
  OptimizerConfig oc;
  auto opt = make_optimizer(oc, model->num_params());
  EXPECT_THROW(SyncThreads(*model, *opt, 0), InvalidArgument);
  auto wrong = make_optimizer(oc, 3);
  EXPECT_THROW(SyncThreads(*model, *wrong, 1), InvalidArgument);
  EXPECT_THROW(make_mlp_model("5-4-3", ds, 0), InvalidArgument);  // sparse data for an MLP
}

}  // namespace
}  // namespace dtrain
