// dtrain plan — explain a plan before running it.
//
//   dtrain plan collective --op allreduce -n 8 --size 64M [--transport shm|tcp]
//       [--calibration FILE] [--segment BYTES] [--json]
// prints the cost model's predicted time for every algorithm of the op and which one `auto`
// picks (plan/collective_plan.h), using the same parameters a run would: the calibration
// file ($DTRAIN_CALIBRATION or ~/.cache/dtrain/calibration.json, written by
// `dtrain bench calibrate`) or the per-transport defaults.
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/env.h"
#include "base/settings.h"
#include "base/error.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "coll/call.h"
#include "coll/cost_model.h"
#include "plan/collective_plan.h"

namespace dtrain::cli {
namespace {

int plan_collective_cmd(const Args& args) {
  Flags f("plan collective", args);
  std::string op_name = f.get_string("op", "allreduce", "the collective (allreduce, allgather, broadcast, ...)");
  int p = static_cast<int>(f.get_int("nproc", 8, 1, 1 << 24, "number of ranks", "n"));
  std::string size = f.get_string("size", "64M", "buffer size in bytes (K, M, G suffixes)", "s");
  std::string transport = f.get_string("transport", "shm", "shm or tcp");
  std::string calibration = f.get_string("calibration", "", "calibration JSON (default: the one runs read)");
  int64_t segment = f.get_int("segment", 0, 0, int64_t{1} << 40, "pipelining segment in bytes (0 = default)");
  bool json = f.get_bool("json", "print JSON instead of a table");
  if (f.help_requested()) {
    std::printf("%s", f.help_text("--op allreduce -n 8 --size 64M [--transport tcp]").c_str());
    return 0;
  }
  f.finish();
  CollOp op = parse_coll_op(op_name);
  DT_CHECK(p >= 1, InvalidArgument, "-n must be >= 1 (got " << p << ")");
  size_t bytes = static_cast<size_t>(parse_size(size, "--size"));
  TransportKind kind = parse_transport_kind(transport);
  DT_CHECK(kind != TransportKind::kAuto, InvalidArgument, "--transport: name shm or tcp");
  std::string kind_name = transport_kind_name(kind);
  const CollConfig config = coll_config_from(Settings::process());
  CostParams cp = cost_params_for(kind_name, config.calibration_path);
  if (!calibration.empty()) {
    std::ifstream in(calibration);
    DT_CHECK(in.good(), IoError, "cannot read --calibration file " << calibration);
    std::stringstream ss;
    ss << in.rdbuf();
    cp = default_cost_params(kind_name);
    DT_CHECK(parse_calibration(ss.str(), kind_name, &cp), Corrupt,
             "--calibration " << calibration << " has no valid \"" << kind_name
                              << "\" entry (alpha_us, beta_gbps, gamma_gbps)");
    cp.source = "calibrated(" + calibration + ")";
  }
  CollOptions o;
  o.segment_bytes = static_cast<size_t>(std::max<int64_t>(0, segment));
  auto rows = plan_collective(op, p, bytes, cp, resolve_segment_bytes(config, o), kind == TransportKind::kShm);
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : rows)
      out.push_back({{"op", coll_op_name(op)}, {"algo", algorithm_name(r.algorithm)}, {"world_size", p},
                     {"size_bytes", bytes}, {"transport", kind_name}, {"predicted_us", r.seconds * 1e6},
                     {"algbw_gbps", r.algbw_gbps}, {"busbw_gbps", r.busbw_gbps}, {"auto", r.chosen}});
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("%s", format_plan(op, p, bytes, kind_name, cp, rows).c_str());
  }
  return 0;
}

}  // namespace

int plan_main(const Args& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fprintf(stderr,
                 "usage: dtrain plan <what> [options]\n\n"
                 "  collective   predicted time of every algorithm and the one auto picks\n"
                 "               (dtrain plan collective --op allreduce -n 8 --size 64M --transport tcp)\n");
    return args.empty() ? 2 : 0;
  }
  DT_CHECK(args[0] == "collective", InvalidArgument, "unknown plan '" << args[0] << "' (use: collective)");
  return plan_collective_cmd(Args(args.begin() + 1, args.end()));
}

}  // namespace dtrain::cli
