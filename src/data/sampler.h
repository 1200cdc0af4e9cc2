// data/sampler.h — seeded orders, batches, distributed shards and non-IID partitions.
//
// Contract
// - epoch_permutation(n, seed, epoch) is a uniformly random permutation of [0, n) that
//   depends only on (n, seed, epoch) (Fisher-Yates on Rng::derive(seed, epoch)); no hidden
//   state, so a resumed run sees exactly the orders the uninterrupted run would have seen.
// - batch_ranges(n, batch, drop_last) cuts [0, n) into consecutive [begin, end) ranges of
//   `batch` items; the last one is shorter unless drop_last drops it.
// - DistributedSampler gives rank r of w its share of an epoch's order: the full order (the
//   same on every rank) is made a multiple of w by dropping the tail (drop_last) or by
//   repeating items from its start (pad), and rank r takes every w-th item starting at r.
//   Every rank gets the same count; shares are disjoint (drop_last) and together cover every
//   example (pad).
// - batch_share(len, rank, world, granule) is rank r's part of ONE global minibatch of `len`
//   items for synchronous data parallelism: the batch is cut into granules of `granule` items
//   (the last may be shorter), and rank r takes granules [G*r/w, G*(r+1)/w) (G = granule
//   count) as one contiguous [begin, end). The shares tile [0, len) in rank order, so the
//   union of the ranks' shares of step t is exactly the single-process minibatch t. With
//   granule 1 the shares differ by at most one item.
// - dirichlet_partition(labels, classes, clients, alpha, seed) splits example ids among
//   clients non-IID: for each class, client shares p ~ Dirichlet(alpha, ..., alpha) and the
//   class's (seeded, shuffled) examples are cut at the cumulative shares. Small alpha (0.1)
//   gives each client a few dominant classes, large alpha (100) is close to IID. Every
//   example goes to exactly one client; each client's list is sorted.
// Thread-safety: stateless functions; DistributedSampler is an immutable value.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace dtrain::data {

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch);
std::vector<std::pair<int64_t, int64_t>> batch_ranges(int64_t n, int64_t batch, bool drop_last);

class DistributedSampler {
 public:
  // shuffle=false keeps the natural order 0..n-1.
  DistributedSampler(int64_t n, int rank, int world_size, bool shuffle, uint64_t seed, bool drop_last);
  // Number of items each rank gets per epoch.
  int64_t per_rank() const;
  std::vector<int64_t> indices(int64_t epoch) const;

 private:
  int64_t n_;
  int rank_, world_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
};

std::pair<int64_t, int64_t> batch_share(int64_t len, int rank, int world, int64_t granule = 1);

// An IID split of [0, n) among `clients`: a seeded permutation cut into near-equal pieces,
// each sorted. One client gets everything, in order 0..n-1.
std::vector<std::vector<int64_t>> iid_partition(int64_t n, int clients, uint64_t seed);

std::vector<std::vector<int64_t>> dirichlet_partition(const std::vector<int32_t>& labels, int num_classes,
                                                      int clients, double alpha, uint64_t seed);

}  // namespace dtrain::data
