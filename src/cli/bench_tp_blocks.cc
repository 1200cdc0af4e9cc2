// dtrain bench tp-blocks — tensor-parallel GPT blocks timed across the job's ranks.
//
//   dtrain bench tp-blocks -n 4 [--tp T] [--spec gpt:layers=1,heads=8,width=128,context=64]
//                          [--items 2,6,12] [--seconds 0.3] [--json FILE]
//
// The job's ranks are one tensor-parallel group (-n is the degree), or with --tp T groups of
// T ranks side by side (consecutive ranks, as a hybrid layout's), all timing at once; for
// each item count every rank times its shard of a block with the real all-reduces
// (plan/calibrate_tp.h), and rank 0 prints forward and backward milliseconds per block (the
// job's slowest rank) and, with --json, writes the rows ([{"spec", "tp", "items", "fwd_s",
// "bwd_s"}], plus "ranks" with --tp). `dtrain bench calibrate` runs it at 2, 4 and 8 ranks,
// and, where those ranks outnumber the cores, with groups of every smaller degree; it keeps
// the rows in the calibration file (plan/cluster.h TpBlockFigure), from which the simulator
// prices tensor-parallel blocks.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "base/settings.h"
#include "cli/bench.h"
#include "cli/flags.h"
#include "coll/communicator.h"
#include "launch/launch.h"
#include "plan/calibrate_tp.h"

#include <nlohmann/json.hpp>

namespace dtrain::cli {

int bench_tp_blocks(const Args& args) {
  Flags f("bench tp-blocks", args);
  const int n = static_cast<int>(f.get_int("nproc", 2, 1, 1024, "ranks to start: the tensor-parallel degree", "n"));
  const std::string spec =
      f.get_string("spec", "gpt:layers=1,heads=8,width=128,context=64", "the GPT whose block to time");
  const std::string items_arg = f.get_string("items", "2,6,12", "sequences per pass, comma-separated");
  const double seconds = f.get_double("seconds", 0.3, 1e-3, 3600, "time per item count");
  const int tp = static_cast<int>(f.get_int("tp", 0, 0, 1024, "ranks per tensor-parallel group (0: all -n of them)"));
  const std::string json = f.get_string("json", "", "write the rows to FILE (rank 0)");
  const double timeout = f.get_double("timeout", 120, 0.1, 1e6, "seconds any blocking call may wait");
  if (f.help_requested()) {
    std::printf("%s", f.help_text("-n 4 [--spec gpt:...] [--items 2,6,12] [--json FILE]").c_str());
    return 0;
  }
  f.finish();
  std::vector<int64_t> items;
  std::stringstream ss(items_arg);
  for (std::string tok; std::getline(ss, tok, ',');) {
    char* end = nullptr;
    const long long v = std::strtoll(tok.c_str(), &end, 10);
    DT_CHECK(!tok.empty() && end && *end == '\0' && v >= 1, InvalidArgument,
             "--items: '" << tok << "' is not a count >= 1 (e.g. --items 2,6,12)");
    items.push_back(v);
  }
  DT_CHECK(!items.empty(), InvalidArgument, "--items: give at least one count (e.g. --items 2,6,12)");
  const int degree = tp > 0 ? tp : n;
  DT_CHECK(degree >= 1 && n % degree == 0, InvalidArgument,
           "--tp " << tp << " must divide -n " << n << " (the job's ranks split into groups of --tp)");
  if (!launch::inside_launched_rank()) {
    launch::LaunchOptions o;
    o.nproc = n;
    o.timeout_s = timeout;
    o.tag_output = false;
    return launch::relaunch_command(o, {"bench", "tp-blocks"}, args);
  }
  auto comm = Communicator::from_env(Settings::process());
  const bool groups = degree < comm->size();
  std::shared_ptr<Communicator> group = groups ? comm->split(comm->rank() / degree, comm->rank()) : nullptr;
  Communicator& tp_comm = groups ? *group : *comm;
  nlohmann::json rows = nlohmann::json::array();
  if (comm->rank() == 0) std::printf("%-44s %4s %5s %6s %12s %12s\n", "spec", "tp", "ranks", "items", "fwd ms", "bwd ms");
  for (int64_t it : items) {
    const plan::TpBlockPoint pt = plan::time_tp_block(tp_comm, spec, it, seconds, groups ? comm.get() : nullptr);
    if (comm->rank() != 0) continue;
    std::printf("%-44s %4d %5d %6lld %12.3f %12.3f\n", spec.c_str(), degree, comm->size(), static_cast<long long>(it),
                pt.fwd_s * 1e3, pt.bwd_s * 1e3);
    rows.push_back({{"spec", spec}, {"tp", degree}, {"items", it}, {"fwd_s", pt.fwd_s}, {"bwd_s", pt.bwd_s}});
    if (groups) rows.back()["ranks"] = comm->size();
  }
  if (comm->rank() == 0 && !json.empty()) {
    std::ofstream out(json);
    DT_CHECK(out.good(), IoError, "bench tp-blocks: cannot write " << json);
    out << rows.dump(2) << "\n";
  }
  comm->barrier();
  return 0;
}

}  // namespace dtrain::cli
