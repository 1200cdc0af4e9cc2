#include "parallel/batch_split.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "coll/collectives.h"
#include "data/sampler.h"

namespace dtrain {
namespace {
// The shares t (summing to 1) held within [lo, hi], which contains 1 / size: each moved by
// the same amount mu and clamped, mu found by bisection so the results sum to 1 (the nearest
// such point, in the least-squares sense). The sum of the clamped values grows with mu.
std::vector<double> within_band(const std::vector<double>& t, double lo, double hi) {
  auto sum_at = [&](double mu) {
    double sum = 0;
    for (double x : t) sum += std::clamp(x + mu, lo, hi);
    return sum;
  };
  const auto [t_lo, t_hi] = std::minmax_element(t.begin(), t.end());
  double below = lo - *t_hi, above = hi - *t_lo;  // every value at lo, every value at hi
  for (int i = 0; i < 100; ++i) {
    const double mid = 0.5 * (below + above);
    (sum_at(mid) < 1.0 ? below : above) = mid;
  }
  const double mu = 0.5 * (below + above), sum = sum_at(mu);
  std::vector<double> out(t.size());
  for (size_t r = 0; r < t.size(); ++r) out[r] = std::clamp(t[r] + mu, lo, hi) / sum;
  return out;
}

}  // namespace

BatchSplit::BatchSplit(int world, int64_t granule, bool measured, int period, std::vector<double> weights)
    : world_(world), granule_(granule), measured_(measured && world > 1), period_(period),
      w_(static_cast<size_t>(std::max(world, 1)), 1.0 / std::max(world, 1)) {
  DT_CHECK(world >= 1 && granule >= 1 && period >= 1, InvalidArgument,
           "BatchSplit: world " << world << ", granule " << granule << " and period " << period << " must be >= 1");
  if (weights.empty()) return;
  DT_CHECK(weights.size() == static_cast<size_t>(world), InvalidArgument,
           "batch split: " << weights.size() << " weights for " << world << " ranks; give one per rank");
  double sum = 0;
  for (double w : weights) {
    DT_CHECK(std::isfinite(w) && w > 0, InvalidArgument, "batch split: weight " << w << " must be a positive number");
    sum += w;
  }
  for (size_t r = 0; r < weights.size(); ++r) {
    w_[r] = weights[r] / sum;
    fixed_ = fixed_ || weights[r] != weights[0];
  }
  fixed_ = fixed_ && !measured_;
}

std::pair<int64_t, int64_t> BatchSplit::share(int64_t len, int rank) const {
  const int64_t g = (len + granule_ - 1) / granule_;
  if (even() || g < world_) return data::batch_share(len, rank, world_, granule_);
  // Cut r is round(g W_r), moved where needed so that ranks ..r-1 keep a granule each before
  // it (at least one past cut r-1) and ranks r.. one each after it.
  int64_t first = 0, last = 0;
  double cum = 0;
  for (int r = 1; r <= rank + 1; ++r) {
    cum += w_[static_cast<size_t>(r - 1)];
    const auto c = static_cast<int64_t>(std::llround(cum * static_cast<double>(g)));
    first = last;
    last = r == world_ ? g : std::clamp<int64_t>(c, first + 1, g - (world_ - r));
  }
  return {std::min(len, first * granule_), std::min(len, last * granule_)};
}

void BatchSplit::record(double seconds, int64_t items) {
  if (!measured_) return;
  seconds_ += seconds;
  items_ += items;
  ++steps_;
}

std::vector<double> BatchSplit::next_weights(const std::vector<double>& weights, const std::vector<double>& seconds_items) {
  const size_t p = weights.size();
  DT_CHECK(seconds_items.size() == 2 * p, InvalidArgument,
           "BatchSplit: " << seconds_items.size() << " gathered values for " << p << " ranks (two each)");
  std::vector<double> rate(p);
  double total = 0;
  for (size_t r = 0; r < p; ++r) {
    const double s = seconds_items[2 * r], n = seconds_items[2 * r + 1];
    // A rank with nothing measured (no items, or a clock that did not move) keeps its weight.
    if (!(s > 0) || !(n > 0) || !std::isfinite(s)) return weights;
    rate[r] = n / s;
    total += rate[r];
  }
  for (double& x : rate) x /= total;
  const double even = 1.0 / static_cast<double>(p);
  const std::vector<double> target = within_band(rate, even * (1 - kMeasuredSpread), even * (1 + kMeasuredSpread));
  std::vector<double> next(p);
  for (size_t r = 0; r < p; ++r) next[r] = 0.5 * (weights[r] + target[r]);
  return next;
}

void BatchSplit::rebalance(Communicator& comm) {
  if (!measured_) return;
  const double mine[2] = {seconds_, static_cast<double>(items_)};
  std::vector<double> all(2 * static_cast<size_t>(world_));
  allgather(comm, mine, all.data(), 2, DType::kFloat64);
  w_ = next_weights(w_, all);
  seconds_ = 0;
  items_ = 0;
  steps_ = 0;
}

}  // namespace dtrain
