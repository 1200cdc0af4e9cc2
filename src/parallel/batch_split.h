// parallel/batch_split.h — how a synchronous step's global minibatch is cut among the ranks:
// evenly, or in proportion to each rank's measured speed.
//
// Why. A synchronous step ends when its slowest rank's share is done, so a rank whose core
// runs slower holds every other rank idle. On the 2-vCPU Xeon VM one of two ranks computes its
// half of the main job's step 17-25% longer than the other, and which one changes from run to
// run (docs/PERFORMANCE.md): with equal halves the faster rank waits that long every step.
// Heterogeneous clusters (mixed CPU generations, a noisy neighbour) show the same.
//
// Why the step's result does not change. Rank r's contribution is c_r = (n_r / B) x the mean
// gradient of its n_r items (parallel/share_grad.h), so the sum over ranks is the mean
// gradient of the whole batch for ANY cut of it; only the order of float additions differs.
// Deterministic mode (fixed-point sums of granule-aligned micro-shards) gives the same bits for
// any cut that respects the granule, which every cut here does.
//
// Algorithm. Weights w_r (summing to 1, equal at the start) cut a batch of G granules at the
// rounded cumulative weights: rank r takes granules [round(G W_r), round(G W_{r+1})), W_r =
// w_0 + ... + w_{r-1}; each cut is moved, where needed, so every rank keeps at least one
// granule (a batch of fewer granules than ranks is cut evenly, as data::batch_share does).
// Measured mode: each rank records the seconds its own compute took and the items it had,
// step by step; every `period` steps the ranks all-gather those two sums over the period
// (one 16-byte all-gather), and each rank turns them into rates s_r = items_r / seconds_r and
// targets t_r = s_r / sum_q s_q, held within kMeasuredSpread of the even share (1 +- 0.2
// times 1 / world: all shifted by one amount and clamped, so they still sum to 1). The weights move halfway
// to the targets (w <- (w + t) / 2), so one disturbed period moves the cut by half its error.
// The band keeps a rank that stalled once from being starved, and bounds what a rank holds:
// its activations grow with its share, and the planner prices a rank's memory at the band's
// top (plan/simulate_data_parallel.cc) -- unbounded, a 2-rank validation's busiest rank held
// 16% more than predicted. It covers ranks up to 1.5x apart; beyond that the faster still
// waits, less than with the even cut. The fixed point is where every rank's compute takes
// equally long. Every rank computes the same weights from the same
// gathered numbers in the same order, so the cuts agree with no further message.
//
// Contract
// - Weights given to the constructor must be one per rank, finite and > 0 (InvalidArgument
//   otherwise, naming what was wrong).
// - share(len, rank): rank's [begin, end) of a batch of `len` items; the shares tile [0, len)
//   in rank order, each a multiple of the granule (except where the batch ends).
// - record(seconds, items): this rank's compute for one step. due(): whether the next call of
//   rebalance() is this step's (every `period` recorded steps, the same step on every rank).
// - rebalance(comm): collective on `comm` (every rank, the same step); a no-op for `even`.
// Thread-safety: one training thread.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace dtrain {

class Communicator;

enum class BatchSplitMode { kEven, kMeasured, kAuto };

// A measured weight stays within this fraction of the even share 1 / world (see above).
inline constexpr double kMeasuredSpread = 0.2;

// Whether a cut in `mode` follows the ranks' measured speed: kMeasured always; kAuto unless
// the run promises the same bits every time (deterministic: its parameters would not change,
// but its reported losses are float sums over the shares) or ranks outnumber the cores (a
// rank's compute time is then the scheduler's). DataParallel and the planner's simulator
// both decide by it.
inline bool split_measures(BatchSplitMode mode, bool deterministic, bool ranks_outnumber_cores) {
  return mode == BatchSplitMode::kMeasured ||
         (mode == BatchSplitMode::kAuto && !deterministic && !ranks_outnumber_cores);
}

class BatchSplit {
 public:
  // measured = false: a fixed split: `weights` (one positive number per rank, normalised
  // here), or where empty the even one (data::batch_share's). measured = true starts from
  // `weights` (or equal ones) and follows the ranks' speed.
  BatchSplit(int world, int64_t granule, bool measured, int period = 16, std::vector<double> weights = {});
  std::pair<int64_t, int64_t> share(int64_t len, int rank) const;
  void record(double seconds, int64_t items);
  bool due() const { return measured_ && steps_ >= period_; }
  void rebalance(Communicator& comm);
  bool measured() const { return measured_; }
  bool even() const { return !measured_ && !fixed_; }
  const std::vector<double>& weights() const { return w_; }
  // The weights from gathered (seconds, items) pairs, rank by rank (rebalance's arithmetic):
  // halfway from `weights` to the rates' shares held within the band.
  static std::vector<double> next_weights(const std::vector<double>& weights, const std::vector<double>& seconds_items);

 private:
  int world_;
  int64_t granule_;
  bool measured_;
  bool fixed_ = false;  // fixed weights that are not all equal
  int period_;
  std::vector<double> w_;
  double seconds_ = 0;
  int64_t items_ = 0;
  int steps_ = 0;
};

}  // namespace dtrain
