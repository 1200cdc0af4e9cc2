// dtrain plan — explain a plan before running it.
//
//   dtrain plan collective --op allreduce -n 8 --size 64M [--transport shm|tcp]
//       [--calibration FILE] [--segment BYTES] [--json]
// prints the cost model's predicted time for every algorithm of the op and which one `auto`
// picks (plan/collective_plan.h), using the same parameters a run would: the calibration
// file ($DTRAIN_CALIBRATION or ~/.cache/dtrain/calibration.json, written by
// `dtrain bench calibrate`) or the per-transport defaults.
//
//   dtrain plan train --model SPEC --ranks N [--cluster FILE] [--memory-gb M] [--batch B]
//       [--strategy S] [--optimizer O] [--top K] [--json] [--measure K --data D --steps S [--repeats R]]
// enumerates the layouts, drops those over memory, ranks by predicted step time
// (plan/planner.h); --measure K runs the top K here with `dtrain train` and prints predicted
// against measured (plan/plan_measure.h); --repeats R runs each R times in rounds, compares
// the medians and says whether the measured fastest is apart from the chosen or a draw
// within the runs' spread ("measured" in the JSON). Where a unit of the model is priced far past the
// shapes the calibration timed, a note under the table says which and the command that times
// the model's own ("extrapolated" in the JSON; cli/plan_predict.h extrapolation_json).
//
//   dtrain plan scale --model SPEC [--max-ranks N] [--batch-per-rank B] [--cluster FILE]
//       [--svg FILE] [--json]
// predicted speedup and efficiency against N (weak scaling) with the Amdahl and Gustafson fits.
//
//   dtrain plan run RUN.json [the run's dtrain train flags]
// prices a recorded run again (`dtrain train --json RUN.json`) with this build and the
// calibration now in force: the same prediction object a run records (cli/plan_predict.h),
// from the run's own measurements (the cores' samples, the steady step, the heap). It
// separates a change of the model from the machine's moods: same measurements, new price.
// The flags must be the run's (they fix what the JSON does not record: --sync, --servers,
// --microbatches ...); a flag that contradicts the JSON (strategy, ranks, model, batch) is
// an error.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/env.h"
#include "base/settings.h"
#include "base/error.h"
#include "base/median.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/plan_predict.h"
#include "cli/train_flags.h"
#include "coll/call.h"
#include "coll/cost_model.h"
#include "plan/closed_forms.h"
#include "plan/collective_plan.h"
#include "plan/planner.h"
#include "plan/plan_measure.h"
#include "train/report.h"

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


plan::Cluster cluster_flag(const std::string& path) { return path.empty() ? plan::this_machine(Settings::process().calibration_path()) : plan::load_cluster(path); }

nlohmann::json prediction_json(const plan::Layout& l, const plan::Prediction& p) {
  return {{"layout", l.describe()}, {"strategy", l.strategy}, {"dp", l.dp}, {"tp", l.tp}, {"pp", l.pp},
          {"zero", l.zero}, {"microbatches", l.micro}, {"schedule", l.schedule},
          {"virtual_stages", l.virtual_stages}, {"recompute", l.recompute}, {"bucket_mb", l.bucket_mb},
          {"step_ms", p.step_s * 1e3}, {"compute_ms", p.compute_s * 1e3}, {"comm_ms", p.comm_s * 1e3},
          {"bubble_ms", p.bubble_s * 1e3}, {"optimizer_ms", p.optimizer_s * 1e3},
          {"memory_mb", p.memory_b() / 1e6}, {"weights_mb", p.weights_b / 1e6}, {"grads_mb", p.grads_b / 1e6},
          {"optimizer_state_mb", p.optimizer_b / 1e6}, {"activations_mb", p.activations_b / 1e6},
          {"dp_bytes", p.dp_bytes}, {"tp_bytes", p.tp_bytes}, {"pp_bytes", p.pp_bytes}};
}

// A measured layout's prediction: where its runs each priced themselves with the 2-rank path
// their probe chose (the run's own prediction, which the plan, made before the run, could
// not know), the median of those; else the plan's.
double measured_prediction(const plan::LayoutRuns& lr, double planned, std::string* cores) {
  std::vector<double> own;
  for (const plan::Measured& m : lr.runs)
    if (m.predicted_step_s > 0 && !m.shm_cores.empty()) {
      own.push_back(m.predicted_step_s);
      if (cores->empty() || *cores == m.shm_cores) *cores = m.shm_cores;
      else *cores = "mixed";
    }
  return own.size() == lr.runs.size() ? median(own, "the runs' own predictions") : planned;
}

std::string verdict_words(const plan::PlanResult& r, const std::vector<plan::LayoutRuns>& runs,
                          const plan::MeasuredVerdict& v) {
  char line[512];
  if (runs.size() == 1) return "";
  if (v.fastest == 0) {
    std::snprintf(line, sizeof line, "the chosen layout measured fastest of the %zu (median %.3f ms)%s", runs.size(),
                  runs[0].median_s * 1e3, runs[0].runs.size() < 2 ? "; one run each" : "");
    return line;
  }
  std::snprintf(line, sizeof line, "measured fastest: #%zu %s, median %.3f ms; the chosen (#1) %.3f ms, %+.1f%%", v.fastest + 1,
                r.ranked[v.fastest].layout.describe().c_str(), runs[v.fastest].median_s * 1e3, runs[0].median_s * 1e3,
                v.chosen_excess * 100);
  std::string out = line;
  if (!v.judged)
    out += ": one run each cannot tell a lead from the machine's noise (--repeats 3)";
  else if (v.apart)
    out += ": apart (every run of the chosen slower than every run of the other)";
  else {
    std::snprintf(line, sizeof line, ": a draw here (their runs overlap: the chosen's fastest %.3f ms, the other's slowest %.3f)",
                  runs[0].min_s * 1e3, runs[v.fastest].max_s * 1e3);
    out += line;
  }
  return out;
}

std::string measured_table(const plan::PlanResult& r, const std::vector<plan::LayoutRuns>& runs) {
  std::string out;
  char line[512];
  const bool several = !runs.empty() && runs[0].runs.size() > 1;
  for (size_t i = 0; i < runs.size(); ++i) {
    std::string cores;
    const double pred = measured_prediction(runs[i], r.ranked[i].pred.step_s, &cores);
    std::snprintf(line, sizeof line, "%-48s predicted %9.3f ms  measured %9.3f ms  error %+6.1f%%", r.ranked[i].layout.describe().c_str(),
                  pred * 1e3, runs[i].median_s * 1e3, (pred / runs[i].median_s - 1) * 100);
    out += line;
    if (several) {
      std::snprintf(line, sizeof line, "  (median of %zu: %.3f-%.3f)", runs[i].runs.size(), runs[i].min_s * 1e3,
                    runs[i].max_s * 1e3);
      out += line;
    }
    if (!cores.empty()) out += "  (2-rank path: cores " + cores + ")";
    out += "\n";
  }
  const std::string verdict = verdict_words(r, runs, plan::judge_measured(runs));
  return verdict.empty() ? out : out + verdict + "\n";
}

nlohmann::json measured_json(const plan::PlanResult& r, const std::vector<plan::LayoutRuns>& runs) {
  nlohmann::json layouts = nlohmann::json::array();
  for (size_t i = 0; i < runs.size(); ++i) {
    std::string cores;
    nlohmann::json steps = nlohmann::json::array();
    for (const plan::Measured& m : runs[i].runs) steps.push_back(m.step_s * 1e3);
    layouts.push_back({{"layout", r.ranked[i].layout.describe()},
                       {"predicted_step_ms", measured_prediction(runs[i], r.ranked[i].pred.step_s, &cores) * 1e3},
                       {"step_ms", runs[i].median_s * 1e3}, {"step_min_ms", runs[i].min_s * 1e3},
                       {"step_max_ms", runs[i].max_s * 1e3}, {"runs_ms", steps}, {"shm_cores", cores}});
  }
  const plan::MeasuredVerdict v = plan::judge_measured(runs);
  return {{"layouts", layouts},
          {"fastest", v.fastest},
          {"chosen_excess", v.chosen_excess},
          {"judged", v.judged},
          {"apart", v.apart},
          {"verdict", verdict_words(r, runs, v)}};
}

int plan_train_cmd(const Args& args) {
  Flags f("plan train", args);
  std::string model = f.get_string("model", "gpt:layers=4,heads=4,width=128,context=64", "model spec, as dtrain train --model");
  int ranks = static_cast<int>(f.get_int("ranks", 4, 1, 1 << 24, "number of ranks", "n"));
  std::string cluster = f.get_string("cluster", "", "cluster JSON (docs/clusters/); default: this machine");
  double memory = f.get_double("memory-gb", 0, 0, 1e9, "memory per rank in GB (default: the cluster's)");
  int64_t batch = f.get_int("batch", 0, 0, int64_t{1} << 40, "global batch (default: 12 x ranks for the GPT, 64 for the MLP)");
  std::string strategy = f.get_string("strategy", "", "only this strategy (ddp, ps, localsgd, gossip, fedavg, tp, pp, zero, hybrid)");
  std::string optimizer = f.get_string("optimizer", "", "as dtrain train --optimizer (default: its default, adamw for the GPT, sgd for the MLP)");
  const int64_t train_rows = f.get_int("train-rows", 0, 0, int64_t{1} << 40,
                                      "the MLP's training set in rows, for its memory (each rank holds the epoch's order: "
                                      "8 bytes a row; default 60000, Fashion-MNIST's)");
  int top = static_cast<int>(f.get_int("top", 10, 1, 1000000, "rows to print"));
  int measure = static_cast<int>(f.get_int("measure", 0, 0, 1000, "run the top K here and print predicted vs measured"));
  int repeats = static_cast<int>(f.get_int("repeats", 1, 1, 100,
                                           "with --measure: run each layout this many times, in rounds, and compare the "
                                           "medians (3 or more tell a lead from the runs' spread)"));
  std::string data = f.get_string("data", "", "--data for the measured runs (the GPT: text:FILE)");
  int64_t steps = f.get_int("steps", 20, 1, 1000000, "GPT steps per measured run");
  bool json = f.get_bool("json", "print JSON instead of a table");
  std::string cores = f.get_string("cores", "", "close or far: price 2-rank shared-memory paths and cross-core cache rates as a "
                                                "2-rank job whose probe found its cores so (default: the calibration's mixed figures)");
  std::string transport = f.get_string("transport", "shm", "shm or tcp: the fabric the job will run on here (tcp: the "
                                                           "calibration's tcp tables, none of the shared-memory paths)");
  int hosts = static_cast<int>(f.get_int("hosts", 1, 1, 1 << 20, "hosts like this one the ranks will span, --ranks / H each "
                                                                 "(over tcp; the link between them is the one `dtrain bench "
                                                                 "calibrate` timed across hosts: docs/PLANNER.md)"));
  if (f.help_requested()) {
    std::printf("%s", f.help_text("--model gpt:layers=4,heads=4,width=128,context=64 --ranks 8 [--measure 3 --data text:input.txt]").c_str());
    return 0;
  }
  f.finish();
  DT_CHECK(transport == "shm" || transport == "tcp", InvalidArgument, "--transport takes shm or tcp (got '" << transport << "')");
  const bool over_tcp = transport == "tcp" || hosts > 1;
  DT_CHECK(cluster.empty() || !over_tcp, InvalidArgument,
           "--transport tcp and --hosts describe jobs on this machine's calibration; a --cluster file describes its own "
           "nodes and links (\"nodes\", \"inter\"): drop one of them");
  DT_CHECK(ranks % hosts == 0, InvalidArgument, "--hosts " << hosts << " must divide --ranks " << ranks << " (ranks a host alike)");
  DT_CHECK(measure == 0 || !over_tcp, InvalidArgument,
           "--measure runs the layouts here over shared memory; plan over tcp or across hosts without it and time the "
           "chosen layout with dtrain train --transport tcp (its --json records the prediction beside the run)");
  plan::ModelSpec m = plan::ModelSpec::parse(model);
  if (batch == 0) batch = m.gpt ? 12 * ranks : 64;
  plan::Cluster c = cluster_flag(cluster);
  if (over_tcp) c = plan::over_fabric(std::move(c), "tcp", hosts, ranks / hosts);
  DT_CHECK(cores.empty() || cores == "close" || cores == "far", InvalidArgument,
           "--cores takes close or far (a 2-rank job's probe verdict, as dtrain train --json records it in shm_cores), got '"
               << cores << "'");
  if (!cores.empty()) {
    bool used = false;
    c = plan::with_core_distance(std::move(c), cores == "far", &used);
    if (!used)
      std::fprintf(stderr, "dtrain plan train: note: the machine model has no %s figures; --cores %s changes nothing\n",
                   cores.c_str(), cores.c_str());
  }
  plan::PlanOptions o;
  o.strategy = strategy;
  o.memory_gb = memory;
  o.optimizer = optimizer;
  o.train_rows = train_rows;
  auto r = plan::plan(m, ranks, c, batch, o);
  DT_CHECK(measure == 0 || !r.ranked.empty(), InvalidArgument, "--measure: no layout fits; nothing to run");
  std::vector<plan::Layout> to_measure;
  for (int i = 0; i < std::min<int>(measure, static_cast<int>(r.ranked.size())); ++i)
    to_measure.push_back(r.ranked[i].layout);
  if (json) {
    nlohmann::json out = {{"model", model}, {"ranks", ranks}, {"batch", batch}, {"cluster", plan::cluster_to_json(c)},
                          {"enumerated", r.enumerated}, {"dropped_memory", r.dropped_memory},
                          {"plan_seconds", r.seconds}, {"why", r.why}, {"close_to_best", r.close_to_best},
                          {"layouts", nlohmann::json::array()}};
    if (const nlohmann::json x = extrapolation_json(model, c); !x.is_null()) out["extrapolated"] = x;
    for (int i = 0; i < std::min<int>(top, static_cast<int>(r.ranked.size())); ++i)
      out["layouts"].push_back(prediction_json(r.ranked[i].layout, r.ranked[i].pred));
    if (!to_measure.empty()) {
      const auto runs = plan::measure_layouts(
          model, to_measure, batch, data, steps, repeats, [&](int round, size_t i, const plan::Measured& meas) {
            std::fprintf(stderr, "round %d/%d: %s measured %.3f ms\n", round + 1, repeats, to_measure[i].describe().c_str(),
                         meas.step_s * 1e3);
          });
      out["measured"] = measured_json(r, runs);
    }
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("%s", plan::format_plan_table(m, ranks, batch, c, r, top).c_str());
    if (const nlohmann::json x = extrapolation_json(model, c); !x.is_null())
      std::printf("note: %s\n", extrapolation_words(x).c_str());
  }
  if (!json && !to_measure.empty()) {
    std::printf("\nmeasuring the top %zu here (dtrain train)%s:\n", to_measure.size(),
                repeats > 1 ? (", " + std::to_string(repeats) + " rounds, each layout once a round, every other round in "
                               "reverse order").c_str()
                            : "");
    std::fflush(stdout);
    const auto runs = plan::measure_layouts(model, to_measure, batch, data, steps, repeats,
                                            [&](int round, size_t i, const plan::Measured& meas) {
                                              if (repeats == 1) return;
                                              std::printf("  round %d: %-44s %9.3f ms\n", round + 1,
                                                          to_measure[i].describe().c_str(), meas.step_s * 1e3);
                                              std::fflush(stdout);
                                            });
    std::printf("%s", measured_table(r, runs).c_str());
  }
  return 0;
}

int plan_scale_cmd(const Args& args) {
  Flags f("plan scale", args);
  std::string model = f.get_string("model", "gpt:layers=4,heads=4,width=128,context=64", "model spec");
  int max_ranks = static_cast<int>(f.get_int("max-ranks", 16384, 1, 1 << 20, "largest N (powers of two from 1)"));
  int64_t per_rank = f.get_int("batch-per-rank", 0, 0, int64_t{1} << 30, "items per rank per step (default: 12 for the GPT, 64 for the MLP)");
  std::string cluster = f.get_string("cluster", "", "cluster JSON (docs/clusters/); default: this machine");
  std::string strategy = f.get_string("strategy", "", "only this strategy");
  std::string svg = f.get_string("svg", "", "write the speedup chart here (SVG)");
  bool json = f.get_bool("json", "print JSON instead of a table");
  if (f.help_requested()) {
    std::printf("%s", f.help_text("--model gpt:layers=4,heads=4,width=128,context=64 --cluster docs/clusters/gpu-cluster.json --svg scale.svg").c_str());
    return 0;
  }
  f.finish();
  plan::ModelSpec m = plan::ModelSpec::parse(model);
  if (per_rank == 0) per_rank = m.gpt ? 12 : 64;
  plan::Cluster c = cluster_flag(cluster);
  plan::PlanOptions o;
  o.strategy = strategy;
  o.max_micro = 16;
  auto s = plan::scale(m, c, per_rank, max_ranks, o);
  if (json) {
    nlohmann::json out = {{"model", model}, {"cluster", c.name}, {"amdahl_serial", s.amdahl_serial},
                          {"gustafson_serial", s.gustafson_serial}, {"points", nlohmann::json::array()}};
    for (const auto& p : s.points)
      out["points"].push_back({{"ranks", p.ranks}, {"layout", p.layout.describe()}, {"step_ms", p.step_s * 1e3},
                               {"items_per_s", p.throughput}, {"speedup", p.speedup}, {"efficiency", p.efficiency}});
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("model %s, cluster %s, %lld items per rank per step (weak scaling)\n", model.c_str(), c.name.c_str(),
                static_cast<long long>(per_rank));
    std::printf("%8s  %-44s %10s %12s %10s %7s %9s %9s\n", "ranks", "best layout", "step ms", "items/s", "speedup", "eff",
                "amdahl", "gustafson");
    for (const auto& p : s.points)
      std::printf("%8d  %-44s %10.3f %12.0f %10.1f %6.1f%% %9.1f %9.1f\n", p.ranks, p.layout.describe().c_str(),
                  p.step_s * 1e3, p.throughput, p.speedup, p.efficiency * 100,
                  plan::amdahl_speedup(s.amdahl_serial, p.ranks), plan::gustafson_speedup(s.gustafson_serial, p.ranks));
    std::printf("fits: Amdahl serial fraction %.3g, Gustafson serial fraction %.3g\n", s.amdahl_serial, s.gustafson_serial);
  }
  if (!svg.empty()) {
    std::ofstream out(svg);
    DT_CHECK(out.good(), IoError, "cannot write --svg " << svg);
    out << plan::svg_chart(s, "predicted speedup, " + model + " on " + c.name);
    std::fprintf(stderr, "wrote %s\n", svg.c_str());
  }
  return 0;
}

int plan_run_cmd(const Args& args) {
  DT_CHECK(!args.empty() && args[0].rfind("--", 0) != 0, InvalidArgument,
           "dtrain plan run takes the run's JSON first, then its dtrain train flags "
           "(dtrain plan run RUN.json --strategy ps --sync -n 4 ...)");
  nlohmann::json run;
  try {
    run = read_json_file(args[0]);
  } catch (const Error& e) {
    DT_THROW(InvalidArgument, "dtrain plan run: " << e.what() << " (give a dtrain train --json report)");
  }
  DT_CHECK(run.is_object() && run.contains("strategy") && run.contains("world_size"), InvalidArgument,
           "dtrain plan run: " << args[0] << " has no strategy or world_size: not a dtrain train --json report");
  Args flags(args.begin() + 1, args.end());
  // A run across hosts went over tcp without the flag (train_cmd.cc), and the defaults that
  // follow the transport (ddp's ZeRO stage) are the ones it ran with.
  const bool flagged = std::any_of(flags.begin(), flags.end(), [](const std::string& a) { return a.rfind("--transport", 0) == 0; });
  if (!flagged && run.value("transport", std::string()) == "tcp") flags.insert(flags.end(), {"--transport", "tcp"});
  const TrainConfig f = parse_train_flags(flags);
  auto agree = [&](const char* what, const std::string& flag, const std::string& recorded) {
    DT_CHECK(flag == recorded, InvalidArgument,
             "dtrain plan run: the flags say " << what << " " << flag << " but " << args[0] << " records " << recorded
                                               << ": pass the run's own flags");
  };
  agree("--strategy", f.strategy, run["strategy"].get<std::string>());
  agree("--ranks", std::to_string(f.ranks), std::to_string(run["world_size"].get<int64_t>()));
  if (run.contains("model")) agree("--model", f.model, run["model"].get<std::string>());
  if (run.contains("batch")) agree("--batch", std::to_string(f.batch), std::to_string(run["batch"].get<int64_t>()));
  nlohmann::json p = prediction_for_run(f, run);
  // The peak RSS is the run's, not this process's.
  const nlohmann::json recorded = run.value("prediction", nlohmann::json::object());
  if (recorded.contains("measured_peak_rss_mb")) p["measured_peak_rss_mb"] = recorded["measured_peak_rss_mb"];
  else p.erase("measured_peak_rss_mb");
  std::printf("%s\n", p.dump(2).c_str());
  return 0;
}

}  // namespace

int plan_main(const Args& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fprintf(stderr,
                 "usage: dtrain plan <what> [options]\n\n"
                 "  collective   predicted time of every algorithm and the one auto picks\n"
                 "               (dtrain plan collective --op allreduce -n 8 --size 64M --transport tcp)\n"
                 "  train        rank the parallel layouts of a model by predicted step time\n"
                 "               (dtrain plan train --model gpt:layers=4,heads=4,width=128,context=64 --ranks 8)\n"
                 "  scale        predicted speedup against N up to 16,384 ranks, Amdahl and Gustafson fits\n"
                 "  run          price a recorded run again with this build and calibration\n"
                 "               (dtrain plan run RUN.json --strategy ps --servers 1 --sync -n 4)\n");
    return args.empty() ? 2 : 0;
  }
  Args rest(args.begin() + 1, args.end());
  if (args[0] == "train") return plan_train_cmd(rest);
  if (args[0] == "scale") return plan_scale_cmd(rest);
  if (args[0] == "run") return plan_run_cmd(rest);
  DT_CHECK(args[0] == "collective", InvalidArgument,
           "unknown plan '" << args[0] << "' (use: collective, train, scale, run)");
  return plan_collective_cmd(Args(args.begin() + 1, args.end()));
}

}  // namespace dtrain::cli
