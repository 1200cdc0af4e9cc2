// parallel/stragglers.h — how long a synchronous step's ranks wait for its slowest rank's
// compute, and whether the slowest is always the same rank.
//
// Why. A synchronous step (ddp) ends when its slowest rank has finished backward; every other
// rank idles until then. Two ranks that each compute 12 ms on average can still lose 1-3 ms a
// step to each other when their speeds wander: on a 2-vCPU cloud VM one vCPU runs at half
// speed for 10-15 steps at a time, then the other (a ddp trace of the sitting's MLP, rank 1's
// backward layers 6.6 / 6.4 / 3.0 ms against rank 0's 2.9 / 3.0 / 1.3 for steps 21-31, the
// other way round for steps 32-46, 2026-12-01). Two independent processes lose none of
// that: each runs at its own pace. These figures say how much of a step that costs and
// which kind of straggler it is: a persistent one (one rank slowest nearly always: a slower
// core, a busier host; --batch-split measured moves work off it) or the host's noise (each
// rank slowest in about 1/N of the steps: nothing inside the job can move work ahead of it).
//
// Definitions, over S steps of N ranks whose compute seconds are c[r][s]:
//   wait_s   = sum over steps of (max_r c[r][s] - mean_r c[r][s]): the mean rank's idle time
//              behind the step's slowest compute (the slowest rank itself waits none);
//   slowest  = the rank with the largest c[r][s] in the most steps (ties: the lower rank),
//              slowest_share its fraction of the S steps (a step's tie goes to the lower rank).
//
// Contract
// - straggler_stats(all, ranks, steps): `all` holds ranks x steps compute seconds, rank by rank
//   (rank r's steps at [r * steps, (r + 1) * steps)), as an all-gather of each rank's own
//   series leaves them. InvalidArgument where the size disagrees or ranks < 1; zero steps give
//   zeros. Pure arithmetic.
// Thread-safety: none needed (no state).
#pragma once

#include <cstdint>
#include <span>

namespace dtrain {

struct StragglerStats {
  int64_t steps = 0;
  double wait_s = 0;          // summed over the steps (see above)
  double slowest_compute_s = 0;  // sum over steps of the slowest rank's compute
  int slowest = 0;
  double slowest_share = 0;
};

StragglerStats straggler_stats(std::span<const float> all, int ranks, int64_t steps);

}  // namespace dtrain
