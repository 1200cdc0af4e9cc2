// cli/bench_calibrate_jobs.h — the launcher's part of `dtrain bench calibrate` after the
// 2-rank job wrote the file (cli/bench_calibrate.cc): each rank count's collectives, gap
// factor and ddp's window all-reduce, filed by the cores' verdict, and the tensor-parallel
// blocks, each a `dtrain bench ... -n P` job whose rows go into the file.
//
// Contract
// - add_collectives_by_ranks(path, timeout): the shm all-reduce, reduce-scatter, all-gather
//   and broadcast (kByRanksSizes), the gap factor where ranks outnumber the cores and ddp's
//   window all-reduce (kWindowSizes), at every rank count of plan::calibrated_rank_counts,
//   into links_by_size.intra of the file at `path` (which must hold it); returns the first
//   failing job's exit code, else 0.
// - tcp_collectives_pass(path, timeout, &passes): one pass of the same four collectives over
//   loopback tcp (kTcpByRanksSizes) at every rank count of plan::calibrated_rank_counts, into
//   `passes`; the same returns. write_tcp_collectives_by_ranks(path, passes): each row's
//   median pass into links_by_size.inter (which must hold the 2-rank tcp figures). The
//   launcher spreads the passes over the calibration (before, between and after the
//   shared-memory jobs): three passes a minute apart caught one slow minute of the VM at
//   once (4 ranks, 1 MiB: 923-1,119 us, where 688-817 read a few minutes later). A job over
//   tcp on one host prices its collectives from these (plan/fabric.cc over_fabric):
//   loopback's copies are kernel work on the ranks' own cores, so more ranks than the 2
//   timed by the link's figures are not the ring formula on them (4 ranks on 2 cores 1 MiB
//   737 us against 451 so priced; 8 ranks 2,554 against 544).
// - add_tp_blocks(path, timeout, extra model specs): compute.tp_blocks; the same returns.
// - host_cores() and replace_calibration_file(path, json) (whole or not at all) are shared
//   with cli/bench_calibrate.cc, which defines them.
// Thread-safety: the launcher's main thread.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/calibration_carry.h"

namespace dtrain::cli {

// The rows timed by rank count, and by the threads calibration (cli/bench_calibrate.cc).
constexpr const char* kByRanksSizes = "16K,64K,256K,512K,1M,2M,4M,8M,16M,32M,64M,128M,256M";
constexpr double kByRanksSeconds = 0.25;
constexpr int kByRanksPasses = 3;
// Over loopback tcp: up to 64 MiB (8 ranks' 64 MiB all-reduce takes ~0.2 s on 2 cores; the
// sizes past it are priced on the last point's time per byte).
constexpr const char* kTcpByRanksSizes = "16K,64K,256K,512K,1M,2M,4M,16M,64M";
// ddp's all-reduce in its window (`bench collectives --window`): the sizes of its buckets.
constexpr const char* kWindowSizes = "16K,64K,256K,1M,4M,16M,64M";
// Up to this many passes, to see both verdicts of the cores' distance (below).
constexpr int kVerdictMaxPasses = 5;
// The compute each rank burns before every call when the gap factor is measured: about an
// MLP step's per-rank compute at 4-8 ranks (training's calls are that far apart).
constexpr int kGapUs = 600;
// Passes of it, the lowest factor kept: three calibrations a few minutes apart read x1.40,
// x1.40 and x2.04 at 8 ranks with two. A factor, mixed or of one verdict, needs
// kGapMinCounted passes that counted (ran in one placement of the cores): with three passes
// and the placement moving, one pass alone set the 4-rank far factor of cal-m1 (x1.69,
// 2026-11-30), carried into the next two calibrations, and ddp at 4 ranks was priced +36..+46%
// with it where factors of x1.00-1.04 priced it within 10% (five validations).
constexpr int kGapPasses = 5;
constexpr int kGapMinCounted = plan::kGapFactorMinPasses;

// A gap pass's back-to-back base, in seconds (-1: the pass does not count). `verdict` is
// what the cores' samples read during the gap pass ("" where they were mixed), `own_verdict`
// and `own_s` those of the back-to-back pass run right before it; `table_s` the tables'
// back-to-back row of `verdict` (-1: none); `all_s` every pass's row, used only on a host
// that gives no verdicts (fewer than 2 cores). A ratio across placements of the cores is no
// gap factor: on the EPYC VM a far gap pass over close calls read x3.24-x3.93 where either
// placement alone reads x1.0-1.3.
double gap_pass_base_s(const std::string& verdict, const std::string& own_verdict, double own_s, double table_s,
                       double all_s, int cores);

// The gap factors of the passes that counted, each (the verdict its samples read, "" for
// mixed; its factor): the lowest of all of them (mixed, -1 where fewer than kGapMinCounted
// counted) and of each verdict's (a verdict with fewer than kGapMinCounted left out).
struct GapFactors {
  double mixed = -1;
  std::map<std::string, double> by_verdict;
  std::map<std::string, int> passes;  // by verdict: how many passes each factor is the lowest of
};
GapFactors gap_factors(const std::vector<std::pair<std::string, double>>& counted);

int host_cores();
void replace_calibration_file(const std::string& path, const nlohmann::json& j);
int add_collectives_by_ranks(const std::string& path, double timeout);
// The tcp passes so far: by rank count, (op, bytes) -> each pass's seconds.
struct TcpByRanksPasses {
  std::map<int, std::map<std::pair<std::string, double>, std::vector<double>>> seconds;
  int count = 0;
};
int tcp_collectives_pass(const std::string& path, double timeout, TcpByRanksPasses* passes);
void write_tcp_collectives_by_ranks(const std::string& path, const TcpByRanksPasses& passes);
int add_tp_blocks(const std::string& path, double timeout, const std::vector<std::string>& extra);

}  // namespace dtrain::cli
