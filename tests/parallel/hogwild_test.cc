// HOGWILD! and its locking baseline on a small synthetic sparse problem: both must converge,
// the lock-free run with several threads must reach the serial run's accuracy, and with one
// thread both modes must equal plain serial SGD bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "base/error.h"
#include "data/rng.h"
#include "data/sampler.h"
#include "parallel/hogwild.h"

namespace dtrain {
namespace {

// n examples over d features, 8 nonzeros each, labels from a hidden linear separator with
// 5% label noise: linearly learnable to about 95%.
data::Dataset make_sparse(int64_t n, int64_t d, int classes, uint64_t seed) {
  data::Rng rng(seed);
  std::vector<float> truth(static_cast<size_t>(d * classes));
  for (auto& t : truth) t = static_cast<float>(rng.normal());
  data::Dataset ds;
  ds.source = "synthetic";
  ds.sparse = true;
  ds.rows = n;
  ds.cols = d;
  ds.num_classes = classes;
  for (int c = 0; c < classes; ++c) ds.label_values.push_back(c);
  ds.row_ptr.push_back(0);
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int32_t> cols;
    while (cols.size() < 8) {
      auto j = static_cast<int32_t>(rng.below(static_cast<uint64_t>(d)));
      if (std::find(cols.begin(), cols.end(), j) == cols.end()) cols.push_back(j);
    }
    std::sort(cols.begin(), cols.end());
    std::vector<double> score(static_cast<size_t>(classes), 0.0);
    for (int32_t j : cols) {
      const float v = static_cast<float>(rng.uniform());
      ds.col_idx.push_back(j);
      ds.values.push_back(v);
      for (int c = 0; c < classes; ++c) score[static_cast<size_t>(c)] += v * truth[static_cast<size_t>(j * classes + c)];
    }
    int label = static_cast<int>(std::max_element(score.begin(), score.end()) - score.begin());
    if (classes == 2) label = score[1] - score[0] > 0 ? 1 : 0;
    if (rng.uniform() < 0.05) label = static_cast<int>(rng.below(static_cast<uint64_t>(classes)));
    ds.labels.push_back(label);
    ds.row_ptr.push_back(static_cast<int64_t>(ds.col_idx.size()));
  }
  ds.validate();
  return ds;
}

double train(const data::Dataset& ds, SparseLoss loss, int threads, Hogwild::Mode mode, int epochs,
             std::vector<float>* params_out = nullptr) {
  auto model = make_sparse_model(loss, ds);
  float lr = 0.5f;
  Hogwild hw(*model, &lr, threads, mode);
  for (int e = 0; e < epochs; ++e) {
    auto order = data::epoch_permutation(ds.rows, 3, e);
    LossAcc r = hw.run_epoch(order, 1, nullptr);
    EXPECT_EQ(r.examples, ds.rows);
    EXPECT_TRUE(std::isfinite(r.loss));
  }
  if (params_out) params_out->assign(model->params().begin(), model->params().end());
  return model->evaluate(ds).accuracy();
}

TEST(Hogwild, LockFreeConvergesLikeSerial) {
  data::Dataset ds = make_sparse(6000, 400, 2, 11);
  const double serial = train(ds, SparseLoss::kLogistic, 1, Hogwild::Mode::kLockFree, 4);
  const double wild = train(ds, SparseLoss::kLogistic, 4, Hogwild::Mode::kLockFree, 4);
  const double locked = train(ds, SparseLoss::kLogistic, 4, Hogwild::Mode::kLocked, 4);
  EXPECT_GT(serial, 0.85);
  EXPECT_GT(wild, serial - 0.03);
  EXPECT_GT(locked, serial - 0.03);
}

TEST(Hogwild, SoftmaxAndSvmConverge) {
  data::Dataset ds = make_sparse(6000, 300, 4, 5);
  EXPECT_GT(train(ds, SparseLoss::kSoftmax, 2, Hogwild::Mode::kLockFree, 4), 0.75);
  data::Dataset bin = make_sparse(4000, 300, 2, 6);
  EXPECT_GT(train(bin, SparseLoss::kHinge, 2, Hogwild::Mode::kLockFree, 4), 0.8);
}

TEST(Hogwild, OneThreadIsPlainSgdInBothModes) {
  data::Dataset ds = make_sparse(1000, 100, 3, 2);
  std::vector<float> a, b;
  train(ds, SparseLoss::kSoftmax, 1, Hogwild::Mode::kLockFree, 2, &a);
  train(ds, SparseLoss::kSoftmax, 1, Hogwild::Mode::kLocked, 2, &b);
  EXPECT_EQ(a, b);
  // And equal to a hand-written serial loop over the same order.
  SparseLinear m(SparseLoss::kSoftmax, 100, 3);
  std::vector<float> w(static_cast<size_t>(m.num_params()), 0.0f), scratch(6);
  for (int e = 0; e < 2; ++e)
    for (int64_t i : data::epoch_permutation(ds.rows, 3, e)) {
      bool ok;
      m.sgd_example<PlainAccess>(w.data(), ds.sparse_row(i), ds.labels[static_cast<size_t>(i)], 0.5f, &ok, scratch.data());
    }
  EXPECT_EQ(a, w);
}

TEST(Hogwild, SparseUpdateTouchesOnlyTheRow) {
  SparseLinear m(SparseLoss::kLogistic, 10, 2);
  std::vector<float> w(static_cast<size_t>(m.num_params()), 0.0f), scratch(2);
  const int32_t idx[] = {2, 7};
  const float val[] = {1.0f, -2.0f};
  bool ok;
  m.sgd_example<RelaxedAccess>(w.data(), data::SparseRow{idx, val, 2}, 1, 0.1f, &ok, scratch.data());
  for (int j = 0; j < 10; ++j) {
    if (j == 2 || j == 7) {
      EXPECT_NE(w[static_cast<size_t>(j)], 0.0f) << j;
    } else {
      EXPECT_EQ(w[static_cast<size_t>(j)], 0.0f) << j;
    }
  }
  EXPECT_FLOAT_EQ(w[2], 0.05f);   // -lr * x * dL/ds = -0.1 * 1 * (-0.5)
  EXPECT_FLOAT_EQ(w[7], -0.1f);
  EXPECT_FLOAT_EQ(w[10], 0.05f);  // bias
}

TEST(Hogwild, ModelChecksDataKind) {
  data::Dataset ds = make_sparse(100, 10, 3, 1);
  EXPECT_THROW(make_sparse_model(SparseLoss::kLogistic, ds), InvalidArgument);  // 3 classes
  ds.sparse = false;
  EXPECT_THROW(make_sparse_model(SparseLoss::kSoftmax, ds), InvalidArgument);
}

}  // namespace
}  // namespace dtrain
