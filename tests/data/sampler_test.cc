// Properties of the seeded permutation, batching, the distributed sampler and the
// Dirichlet partitioner.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "base/error.h"
#include "data/rng.h"
#include "data/sampler.h"

namespace dtrain::data {
namespace {

bool is_permutation_of_range(std::vector<int64_t> v, int64_t n) {
  std::sort(v.begin(), v.end());
  std::vector<int64_t> want(static_cast<size_t>(n));
  std::iota(want.begin(), want.end(), 0);
  return v == want;
}

TEST(Permutation, SeededAndPerEpoch) {
  auto a = epoch_permutation(1000, 42, 3);
  EXPECT_TRUE(is_permutation_of_range(a, 1000));
  EXPECT_EQ(a, epoch_permutation(1000, 42, 3));
  EXPECT_NE(a, epoch_permutation(1000, 42, 4));
  EXPECT_NE(a, epoch_permutation(1000, 43, 3));
  EXPECT_TRUE(epoch_permutation(0, 1, 0).empty());
}

TEST(Rng, StateRoundTripAndBelowRange) {
  Rng r(7);
  for (int i = 0; i < 10; ++i) r.next_u64();
  auto st = r.state();
  uint64_t x = r.next_u64();
  Rng s(0);
  s.set_state(st);
  EXPECT_EQ(s.next_u64(), x);
  for (int i = 0; i < 1000; ++i) EXPECT_LT(r.below(7), 7u);
  double mean = 0;
  for (int i = 0; i < 20000; ++i) mean += r.gamma(0.5);
  EXPECT_NEAR(mean / 20000, 0.5, 0.05);  // E[Gamma(a)] = a
}

TEST(Batches, CoverAndDropLast) {
  auto b = batch_ranges(10, 4, false);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[2], (std::pair<int64_t, int64_t>{8, 10}));
  EXPECT_EQ(batch_ranges(10, 4, true).size(), 2u);
  EXPECT_THROW(batch_ranges(10, 0, false), InvalidArgument);
}

TEST(DistributedSampler, DropLastIsDisjointAndEqual) {
  const int64_t n = 103;
  for (int w : {1, 2, 3, 4, 7}) {
    std::set<int64_t> seen;
    for (int r = 0; r < w; ++r) {
      DistributedSampler s(n, r, w, true, 5, true);
      auto idx = s.indices(2);
      EXPECT_EQ(static_cast<int64_t>(idx.size()), n / w);
      for (int64_t i : idx) EXPECT_TRUE(seen.insert(i).second) << "duplicate " << i;
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), n / w * w);
  }
}

TEST(DistributedSampler, PadCoversEverything) {
  const int64_t n = 10;
  for (int w : {3, 4, 12}) {
    std::set<int64_t> seen;
    for (int r = 0; r < w; ++r) {
      DistributedSampler s(n, r, w, false, 0, false);
      auto idx = s.indices(0);
      EXPECT_EQ(static_cast<int64_t>(idx.size()), (n + w - 1) / w);
      seen.insert(idx.begin(), idx.end());
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), n);
  }
  EXPECT_THROW(DistributedSampler(5, 2, 2, true, 0, true), InvalidArgument);
}

TEST(Dirichlet, PartitionIsExactAndSkewFollowsAlpha) {
  std::vector<int32_t> labels;
  for (int i = 0; i < 5000; ++i) labels.push_back(i % 10);
  auto skew = [&](double alpha) {
    auto parts = dirichlet_partition(labels, 10, 8, alpha, 11);
    std::vector<int64_t> all;
    for (auto& p : parts) all.insert(all.end(), p.begin(), p.end());
    EXPECT_TRUE(is_permutation_of_range(all, 5000));
    // Mean over clients of the largest class share.
    double sum = 0;
    int counted = 0;
    for (auto& p : parts) {
      if (p.empty()) continue;
      std::vector<int> c(10, 0);
      for (int64_t i : p) ++c[static_cast<size_t>(labels[static_cast<size_t>(i)])];
      sum += static_cast<double>(*std::max_element(c.begin(), c.end())) / static_cast<double>(p.size());
      ++counted;
    }
    return sum / counted;
  };
  double low = skew(0.05), high = skew(1000);
  EXPECT_GT(low, 0.5);
  EXPECT_LT(high, 0.2);
  EXPECT_EQ(dirichlet_partition(labels, 10, 4, 0.3, 1), dirichlet_partition(labels, 10, 4, 0.3, 1));
  EXPECT_THROW(dirichlet_partition(labels, 10, 4, 0.0, 1), InvalidArgument);
}

}  // namespace
}  // namespace dtrain::data

#include "data/dataset.h"

namespace dtrain::data {
namespace {
TEST(Transform, NormalizeRowsGivesUnitNorm) {
  Dataset ds;
  ds.sparse = true;
  ds.rows = 2;
  ds.cols = 3;
  ds.num_classes = 1;
  ds.labels = {0, 0};
  ds.row_ptr = {0, 2, 2};
  ds.col_idx = {0, 2};
  ds.values = {3, 4};
  normalize_rows(ds);
  EXPECT_FLOAT_EQ(ds.values[0], 0.6f);
  EXPECT_FLOAT_EQ(ds.values[1], 0.8f);  // the empty second row stays empty
}
}  // namespace
}  // namespace dtrain::data

namespace dtrain::data {
namespace {

TEST(BatchShare, TilesTheBatchInRankOrder) {
  for (int64_t len : {1, 7, 64, 65}) {
    for (int w = 1; w <= 5; ++w) {
      for (int64_t g : {1, 8}) {
        int64_t next = 0;
        for (int r = 0; r < w; ++r) {
          auto [b, e] = batch_share(len, r, w, g);
          EXPECT_EQ(b, next) << len << " " << w << " " << g;
          EXPECT_LE(b, e);
          if (e < len) {
            EXPECT_EQ(e % g, 0);  // cuts fall on granule boundaries
          }
          next = e;
        }
        EXPECT_EQ(next, len);
      }
    }
  }
  EXPECT_EQ(batch_share(64, 1, 4), (std::pair<int64_t, int64_t>{16, 32}));
  EXPECT_THROW(batch_share(8, 4, 4), InvalidArgument);
}

TEST(IidPartition, CoversEverythingOnceSortedAndSeeded) {
  auto p = iid_partition(103, 4, 9);
  ASSERT_EQ(p.size(), 4u);
  std::vector<int64_t> all;
  for (const auto& c : p) {
    EXPECT_TRUE(std::is_sorted(c.begin(), c.end()));
    EXPECT_GE(c.size(), 25u);
    all.insert(all.end(), c.begin(), c.end());
  }
  EXPECT_TRUE(is_permutation_of_range(all, 103));
  EXPECT_EQ(p, iid_partition(103, 4, 9));
  auto one = iid_partition(5, 1, 1);
  EXPECT_EQ(one[0], (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

}  // namespace
}  // namespace dtrain::data
