#include "parallel/stragglers.h"

#include <vector>

#include "base/error.h"

namespace dtrain {

StragglerStats straggler_stats(std::span<const float> all, int ranks, int64_t steps) {
  DT_CHECK(ranks >= 1 && steps >= 0, InvalidArgument,
           "straggler_stats: " << ranks << " ranks and " << steps << " steps (need ranks >= 1, steps >= 0)");
  DT_CHECK(static_cast<int64_t>(all.size()) == ranks * steps, InvalidArgument,
           "straggler_stats: " << all.size() << " compute times for " << ranks << " ranks x " << steps << " steps");
  StragglerStats out;
  out.steps = steps;
  if (steps == 0) return out;
  std::vector<int64_t> slowest_in(static_cast<size_t>(ranks), 0);
  for (int64_t s = 0; s < steps; ++s) {
    int arg = 0;
    double max = all[static_cast<size_t>(s)], sum = 0;
    for (int r = 0; r < ranks; ++r) {
      const double c = all[static_cast<size_t>(r * steps + s)];
      sum += c;
      if (c > max) max = c, arg = r;
    }
    out.wait_s += max - sum / ranks;
    out.slowest_compute_s += max;
    ++slowest_in[static_cast<size_t>(arg)];
  }
  for (int r = 1; r < ranks; ++r)
    if (slowest_in[static_cast<size_t>(r)] > slowest_in[static_cast<size_t>(out.slowest)]) out.slowest = r;
  out.slowest_share = static_cast<double>(slowest_in[static_cast<size_t>(out.slowest)]) / static_cast<double>(steps);
  return out;
}

}  // namespace dtrain
