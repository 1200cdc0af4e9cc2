#include "data/sampler.h"

#include <algorithm>
#include <numeric>

#include "base/error.h"
#include "data/rng.h"

namespace dtrain::data {

namespace {
void shuffle(std::vector<int64_t>& v, Rng& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
}
}  // namespace

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  DT_CHECK(n >= 0, InvalidArgument, "epoch_permutation: negative size " << n);
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  Rng rng = Rng::derive(seed, 0x5eed0001, static_cast<uint64_t>(epoch));
  shuffle(v, rng);
  return v;
}

std::vector<std::pair<int64_t, int64_t>> batch_ranges(int64_t n, int64_t batch, bool drop_last) {
  DT_CHECK(batch >= 1, InvalidArgument, "the batch size must be >= 1, got " << batch);
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t b = 0; b < n; b += batch) {
    int64_t e = std::min(n, b + batch);
    if (drop_last && e - b < batch) break;
    out.emplace_back(b, e);
  }
  return out;
}

DistributedSampler::DistributedSampler(int64_t n, int rank, int world_size, bool shuffle, uint64_t seed,
                                       bool drop_last)
    : n_(n), rank_(rank), world_(world_size), shuffle_(shuffle), seed_(seed), drop_last_(drop_last) {
  DT_CHECK(world_size >= 1, InvalidArgument, "world size must be >= 1, got " << world_size);
  DT_CHECK(rank >= 0 && rank < world_size, InvalidArgument,
           "rank " << rank << " is outside [0, " << world_size << ")");
  DT_CHECK(n >= 0, InvalidArgument, "negative dataset size " << n);
}

int64_t DistributedSampler::per_rank() const {
  return drop_last_ ? n_ / world_ : (n_ + world_ - 1) / world_;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  std::vector<int64_t> order;
  if (shuffle_) {
    order = epoch_permutation(n_, seed_, epoch);
  } else {
    order.resize(static_cast<size_t>(n_));
    std::iota(order.begin(), order.end(), 0);
  }
  const int64_t total = per_rank() * world_;
  if (total > n_ && n_ > 0) {
    // Pad by repeating the order from its start (wrapping if w > n).
    for (int64_t i = n_; i < total; ++i) order.push_back(order[static_cast<size_t>((i - n_) % n_)]);
  }
  order.resize(static_cast<size_t>(n_ == 0 ? 0 : total));
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(per_rank()));
  for (int64_t i = rank_; i < static_cast<int64_t>(order.size()); i += world_) mine.push_back(order[static_cast<size_t>(i)]);
  return mine;
}

std::pair<int64_t, int64_t> batch_share(int64_t len, int rank, int world, int64_t granule) {
  DT_CHECK(world >= 1 && rank >= 0 && rank < world, InvalidArgument,
           "batch_share: rank " << rank << " is not in a world of " << world);
  DT_CHECK(granule >= 1 && len >= 0, InvalidArgument, "batch_share: granule must be >= 1 and len >= 0");
  const int64_t g = (len + granule - 1) / granule;
  const int64_t first = g * rank / world, last = g * (rank + 1) / world;
  return {std::min(len, first * granule), std::min(len, last * granule)};
}

std::vector<std::vector<int64_t>> iid_partition(int64_t n, int clients, uint64_t seed) {
  DT_CHECK(clients >= 1, InvalidArgument, "the number of clients must be >= 1, got " << clients);
  const std::vector<int64_t> perm = epoch_permutation(n, seed, 0x11d);
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(clients));
  for (int k = 0; k < clients; ++k) {
    const int64_t lo = n * k / clients, hi = n * (k + 1) / clients;
    out[static_cast<size_t>(k)].assign(perm.begin() + lo, perm.begin() + hi);
    std::sort(out[static_cast<size_t>(k)].begin(), out[static_cast<size_t>(k)].end());
  }
  return out;
}

std::vector<std::vector<int64_t>> dirichlet_partition(const std::vector<int32_t>& labels, int num_classes,
                                                      int clients, double alpha, uint64_t seed) {
  DT_CHECK(clients >= 1, InvalidArgument, "the number of clients must be >= 1, got " << clients);
  DT_CHECK(alpha > 0, InvalidArgument, "the Dirichlet alpha must be > 0, got " << alpha);
  DT_CHECK(num_classes >= 1, InvalidArgument, "need at least one class");
  std::vector<std::vector<int64_t>> by_class(static_cast<size_t>(num_classes));
  for (size_t i = 0; i < labels.size(); ++i) {
    DT_CHECK(labels[i] >= 0 && labels[i] < num_classes, InvalidArgument,
             "label " << labels[i] << " of example " << i << " is outside [0, " << num_classes << ")");
    by_class[static_cast<size_t>(labels[i])].push_back(static_cast<int64_t>(i));
  }
  std::vector<std::vector<int64_t>> parts(static_cast<size_t>(clients));
  Rng rng = Rng::derive(seed, 0xd1c41e7, 0);
  std::vector<double> share(static_cast<size_t>(clients));
  for (auto& members : by_class) {
    shuffle(members, rng);
    // A Dirichlet draw is a vector of independent Gamma(alpha) draws, normalised.
    double sum = 0;
    for (auto& s : share) sum += (s = rng.gamma(alpha));
    // Cut points at the rounded cumulative shares; the last client takes the remainder so
    // every example is assigned exactly once.
    const auto m = static_cast<double>(members.size());
    double cum = 0;
    size_t begin = 0;
    for (int c = 0; c < clients; ++c) {
      cum += share[static_cast<size_t>(c)];
      size_t end = c + 1 == clients ? members.size()
                                    : std::min(members.size(), static_cast<size_t>(m * (sum > 0 ? cum / sum : 0) + 0.5));
      end = std::max(end, begin);
      parts[static_cast<size_t>(c)].insert(parts[static_cast<size_t>(c)].end(), members.begin() + static_cast<std::ptrdiff_t>(begin),
                                           members.begin() + static_cast<std::ptrdiff_t>(end));
      begin = end;
    }
  }
  for (auto& p : parts) std::sort(p.begin(), p.end());
  return parts;
}

}  // namespace dtrain::data
