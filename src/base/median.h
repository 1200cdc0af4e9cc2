// base/median.h — the median of a list of timings.
//
// Contract: median(v) of a non-empty v is its middle value after sorting, or the mean of the
// two middle values for an even count; an empty v is an InvalidArgument error naming `what`.
// Takes v by value (sorts its copy). Used where a figure is the typical one of several rounds
// on a shared machine, e.g. the calibration's rounds (plan/calibrate_compute.cc,
// cli/bench_calibrate.cc).
#pragma once

#include <algorithm>
#include <vector>

#include "base/error.h"

namespace dtrain {

inline double median(std::vector<double> v, const char* what = "median") {
  DT_CHECK(!v.empty(), InvalidArgument, what << ": no values");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace dtrain
