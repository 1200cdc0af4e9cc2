// parallel/search.h — hyper-parameter trials for `--strategy search`, and their placement.
//
// Contract
// - parse_search_grid("lr=0.1,0.03;batch=64,256;momentum=0,0.9;width=128,256") returns the
//   cartesian product of the listed values, in lexicographic order of the keys as written
//   (the first key varies slowest). Keys: lr, batch, momentum, width (every hidden layer's
//   width); unlisted keys take the run's values (flagged as unset, -1). A malformed spec
//   throws InvalidArgument naming the bad part and the accepted keys.
// - random_trials(n, seed) draws n trials: lr log-uniform in [1e-3, 0.3], batch from
//   {32, 64, 128, 256}, momentum from {0, 0.5, 0.9}, width from {64, 128, 256, 512}; the
//   draw depends only on (n, seed).
// - trials_of_rank(count, rank, world): trial i runs on rank i mod world (round robin, so
//   ranks get equal counts within one).
// - apply_width(spec, width): "784-256-128-10" with width 64 -> "784-64-64-10".
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtrain {

struct Trial {
  double lr = -1;
  int64_t batch = -1;
  double momentum = -1;
  int64_t width = -1;
  std::string describe() const;
};

std::vector<Trial> parse_search_grid(const std::string& spec);
std::vector<Trial> random_trials(int64_t n, uint64_t seed);
std::vector<int64_t> trials_of_rank(int64_t count, int rank, int world);
std::string apply_width(const std::string& mlp_dims, int64_t width);

}  // namespace dtrain
