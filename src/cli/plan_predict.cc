#include "cli/plan_predict.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <set>

#include "base/error.h"
#include "base/settings.h"
#include "plan/plan_measure.h"
#include "plan/planner.h"
#include "train/strategies.h"

namespace dtrain::cli {
namespace {

// The value of --name VALUE or --name=VALUE (also a short alias), or "".
std::string arg_value(const Args& a, const std::string& name, const std::string& alias = "") {
  for (size_t i = 0; i < a.size(); ++i) {
    for (const std::string& n : {name, alias}) {
      if (n.empty()) continue;
      if (a[i] == n && i + 1 < a.size()) return a[i + 1];
      if (a[i].rfind(n + "=", 0) == 0) return a[i].substr(n.size() + 1);
    }
  }
  return "";
}

}  // namespace

Args resolve_plan_flag(const Args& args) {
  std::string mode = arg_value(args, "--plan");
  bool present = false;
  for (const auto& a : args) present |= a == "--plan" || a.rfind("--plan=", 0) == 0;
  if (!present) return args;
  DT_CHECK(mode == "auto", InvalidArgument, "--plan takes 'auto' (got '" << mode << "')");
  std::string model = arg_value(args, "--model");
  if (model.empty()) model = "mlp:784-256-128-10";
  std::string n = arg_value(args, "--ranks", "-n"), b = arg_value(args, "--batch");
  plan::ModelSpec m = plan::ModelSpec::parse(model);
  int ranks = n.empty() ? 1 : std::stoi(n);
  int64_t batch = b.empty() ? (m.gpt ? 12 : 64) : std::stoll(b);
  plan::PlanOptions o;
  o.strategy = arg_value(args, "--strategy");
  plan::Cluster c = plan::this_machine(Settings::process().calibration_path());
  auto r = plan::plan(m, ranks, c, batch, o);
  DT_CHECK(!r.ranked.empty(), InvalidArgument,
           "--plan auto: no layout of " << model << " on " << ranks << " ranks with batch " << batch << " fits: " << r.why);
  const auto& best = r.ranked[0];
  std::fprintf(stderr, "plan: %s (predicted %.3f ms/step, %.1f MB/rank; %d layouts, %.3f s); %s\n",
               best.layout.describe().c_str(), best.pred.step_s * 1e3, best.pred.memory_b() / 1e6, r.enumerated,
               r.seconds, r.why.c_str());
  // Drop --plan and the layout flags; keep everything else.
  const std::set<std::string> with_value{"--plan", "--strategy", "--dp", "--tp", "--pp", "--zero", "--microbatches",
                                         "--schedule", "--virtual-stages", "--bucket-mb", "--batch", "--model",
                                         "-n", "--ranks", "--steps", "--epochs", "--data"};
  const std::set<std::string> keep{"--steps", "--epochs", "--data"};
  Args out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    std::string key = a.substr(0, a.find('='));
    if (a == "--recompute") continue;
    if (with_value.count(key)) {
      bool inline_value = a.find('=') != std::string::npos;
      if (keep.count(key)) {
        out.push_back(a);
        if (!inline_value && i + 1 < args.size()) out.push_back(args[i + 1]);
      }
      if (!inline_value) ++i;
      continue;
    }
    out.push_back(a);
  }
  auto planned = plan::train_args(model, best.layout, batch, "", 0);
  // train_args begins with "train" and ends with the per-model run length; keep the user's.
  for (size_t i = 1; i < planned.size(); ++i) {
    if (planned[i] == "--steps" || planned[i] == "--epochs" || planned[i] == "--eval-batches") {
      ++i;
      continue;
    }
    out.push_back(planned[i]);
  }
  return out;
}

// Fewer samples than this say too little (a run shorter than a few tenths of a second): the
// probes before and after it price it.
constexpr double kMinCoreSamples = 3;

nlohmann::json prediction_for_run(const TrainConfig& f, const nlohmann::json& measured, double probe_s) {
  nlohmann::json j;
  try {
    plan::ModelSpec m = plan::ModelSpec::parse(f.model);
    plan::Layout l;
    l.strategy = f.strategy;
    if (m.gpt) {
      MeshDims d = gpt_mesh(f);
      l.dp = d.dp, l.tp = d.tp, l.pp = d.pp;
    } else {
      l.dp = f.ranks;
    }
    l.zero = std::max(0, f.zero);
    l.micro = f.microbatches;
    l.schedule = f.schedule;
    l.virtual_stages = f.virtual_stages;
    l.recompute = f.recompute;
    l.bucket_mb = f.bucket_mb;
    l.shared_params = f.shared_params == "auto" ? -1 : f.shared_params == "on";
    // As train/strategies.cc reads --batch-split: auto cuts evenly with --deterministic.
    l.batch_split = f.batch_split == "measured" ? 1 : f.batch_split == "even" || f.deterministic ? 0 : -1;
    if (!m.gpt) {
      const std::vector<double> w = batch_split_weights(f);
      if (!w.empty()) l.batch_share_max = *std::max_element(w.begin(), w.end()) / std::accumulate(w.begin(), w.end(), 0.0);
    }
    l.sync_every = static_cast<int>(f.sync_every);
    l.servers = f.servers;
    l.ps_sync = f.sync;
    l.clients = f.clients;
    l.client_fraction = f.client_fraction;
    l.seed = f.seed;
    l.rounds = f.epochs;
    l.optimizer = f.optimizer;
    // The training set the run read (its epoch's order is part of every rank's heap).
    l.train_rows = measured.value("train_examples", int64_t{0});
    // The step on a machine model: a 2-rank run whose context probed close or far prices that
    // path (the calibration's tables of the same verdict, plan::with_core_distance), and a
    // run re-probed during itself (coll/shm_context.h after_call) prices the minority
    // verdict's share of the calls from its own tables. A run without that verdict (more
    // ranks than cores, tcp) but with the launcher's probe of the cores (--probe-speed:
    // "cores_probed") is priced with that verdict's figures.
    // The launcher's probe and the one after the last step (train_cmd.cc) bracket the run: where
    // they differ the placement changed while it ran, at a moment nobody saw, and the step is
    // priced half with each verdict's figures.
    // Better still, the launcher's samples while the ranks ran ("cores_sampled"): the step is
    // priced with each verdict's figures in the share of the samples that read it.
    bool by_verdict = false;
    const bool shm_verdict = measured.contains("shm_cores");
    const std::string start = measured.value("cores_probed", std::string());
    const std::string end = measured.value("cores_probed_end", start);
    double far_share = shm_verdict ? measured.value("shm_far_share", -1.0) : start != end ? 0.5 : -1.0;
    std::string verdict = shm_verdict ? measured["shm_cores"].get<std::string>() : end;
    const nlohmann::json sampled = measured.value("cores_sampled", nlohmann::json::object());
    const double closes = sampled.value("close", 0.0), fars = sampled.value("far", 0.0);
    const bool by_samples = !shm_verdict && closes + fars >= kMinCoreSamples;
    if (by_samples) {
      far_share = fars / (closes + fars);
      verdict = far_share > 0.5 ? "far" : "close";
    }
    // The fabric the run's transfers took (run.cc): over tcp, or across hosts, none of the
    // shared-memory paths (nor the cores' verdicts, which choose among them) apply.
    // (Ranks that the launcher put on several hosts but that share one machine's memory, as
    // network namespaces of one host do, ran over shm: the transport is what counts.)
    const std::string transport = measured.value("transport", std::string("shm"));
    const bool over_tcp = transport == "tcp";
    const int hosts = over_tcp ? measured.value("hosts", 1) : 1, ranks_per_host = measured.value("ranks_per_host", 0);
    if (over_tcp) verdict.clear();
    auto predict = [&](const plan::Cluster& machine, plan::Cluster* used) {
      plan::Cluster c = plan::over_fabric(machine, transport, hosts, ranks_per_host);
      if (!verdict.empty()) c = plan::with_core_distance(c, verdict == "far", &by_verdict);
      plan::Prediction p = plan::simulate(m, l, c, f.batch);
      if (by_verdict && far_share > 0 && far_share < 1) {
        const bool far = verdict == "far";
        const plan::Cluster other = plan::with_core_distance(machine, !far);
        p = plan::blend_times(p, plan::simulate(m, l, other, f.batch), far ? 1 - far_share : far_share);
      }
      if (used) *used = std::move(c);
      return p;
    };
    plan::Cluster machine = plan::this_machine(Settings::process().calibration_path());
    // Priced at the pace the probe beside the run found (the file's own re-probe replaced);
    // the step at the calibration's pace is kept beside it.
    double as_calibrated_ms = -1;
    if (probe_s > 0 && machine.speed_probe_s > 0) {
      as_calibrated_ms = predict(plan::at_compute_pace(machine, 1), nullptr).step_s * 1e3;
      machine = plan::at_compute_pace(std::move(machine), probe_s / machine.speed_probe_s);
    }
    plan::Cluster c;
    const plan::Prediction p = predict(machine, &c);
    j = {{"layout", l.describe()}, {"cluster", c.source},
         {"calibrated", c.source.rfind("calibrated", 0) == 0}, {"step_ms", p.step_s * 1e3},
         {"compute_ms", p.compute_s * 1e3}, {"comm_ms", p.comm_s * 1e3}, {"bubble_ms", p.bubble_s * 1e3},
         {"optimizer_ms", p.optimizer_s * 1e3}, {"memory_mb", p.memory_b() / 1e6},
         {"activations_mb", p.activations_b / 1e6}};
    if (over_tcp) j["fabric"] = {{"transport", "tcp"}, {"hosts", hosts}};
    if (by_verdict) j["cores"] = verdict;  // priced with the figures of this verdict
    if (probe_s > 0) j["speed_probe_ms"] = probe_s * 1e3;
    if (machine.compute_scale != 1) j["compute_scale"] = machine.compute_scale;
    if (as_calibrated_ms >= 0) j["step_ms_at_calibration_pace"] = as_calibrated_ms;
    if (by_verdict && far_share >= 0) j[shm_verdict ? "two_rank_far_share" : "cores_far_share"] = far_share;
    if (by_verdict && by_samples) j["cores_samples"] = closes + fars;
    // A unit priced far past the shapes the calibration timed: said, with the command that
    // times this model's own.
    if (const nlohmann::json x = extrapolation_json(f.model, c); !x.is_null()) j["extrapolated"] = x;
    // Measured step: a global minibatch's steady time (plan_measure.h steady_step_s: the median
    // round after the first for the GPT's rounds of steps, batch / examples per second for the
    // MLP's epoch; ps workers and fedavg's fresh local optimizers count no steps on rank 0, so
    // examples are what counts). The mean over the run, warm-up included, is kept beside it.
    int64_t steps = measured.value("steps", int64_t{0});
    double secs = measured.value("train_seconds", 0.0);
    double step = plan::steady_step_s(measured, f.batch);
    if (m.gpt && steps > 0 && secs > 0) j["measured_mean_step_ms"] = secs / static_cast<double>(steps) * 1e3;
    if (step > 0) {
      j["measured_step_ms"] = step * 1e3;
      j["step_error"] = p.step_s / step - 1;
    }
    // Memory: the predicted model state + activations against the heap high-water mark of
    // training above what the data and runtime held before the model (base/heap_stats.h).
    double heap = measured.value("train_heap_mb", 0.0);
    if (heap > 0) {
      j["measured_train_heap_mb"] = heap;
      j["memory_error"] = p.memory_b() / 1e6 / heap - 1;
    }
  } catch (const std::exception& e) {
    j = {{"error", e.what()}};
  }
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  j["measured_peak_rss_mb"] = ru.ru_maxrss / 1024.0;
  return j;
}

std::string prediction_line(const nlohmann::json& p) {
  if (!p.contains("step_ms") || !p.contains("memory_mb")) return "";
  char buf[512];
  std::string out = "prediction: ";
  const double step = p["step_ms"].get<double>(), mem = p["memory_mb"].get<double>();
  if (p.contains("measured_step_ms")) {
    std::snprintf(buf, sizeof buf, "step %.3f ms, measured %.3f (%+.0f%%)", step, p["measured_step_ms"].get<double>(),
                  p.value("step_error", 0.0) * 100);
  } else {
    std::snprintf(buf, sizeof buf, "step %.3f ms (no steady step measured)", step);
  }
  out += buf;
  if (p.contains("measured_train_heap_mb")) {
    std::snprintf(buf, sizeof buf, "; memory %.2f MB/rank, measured %.2f (%+.0f%%)", mem,
                  p["measured_train_heap_mb"].get<double>(), p.value("memory_error", 0.0) * 100);
  } else {
    std::snprintf(buf, sizeof buf, "; memory %.2f MB/rank", mem);
  }
  out += buf;
  const std::string source = p.value("cluster", std::string());
  out += "; machine model " + source;
  if (p.contains("cores") && p.contains("cores_samples")) {
    char share[160];
    std::snprintf(share, sizeof share, ", priced for cores far in %.0f%% and close in %.0f%% (%.0f samples while it ran)",
                  p.value("cores_far_share", 0.0) * 100, (1 - p.value("cores_far_share", 0.0)) * 100,
                  p["cores_samples"].get<double>());
    out += share;
  } else if (p.contains("cores")) {
    const std::string v = p["cores"].get<std::string>();
    out += p.contains("cores_far_share")
               ? ", priced half for cores close and half far (they were " + std::string(v == "far" ? "close" : "far") +
                     " before the run and " + v + " after it)"
               : ", priced for cores " + v + " (as the run probed them)";
  }
  if (!p.value("calibrated", false)) out += " (compute not measured here: `dtrain bench calibrate` measures it)";
  if (p.contains("extrapolated")) out += "; " + extrapolation_words(p["extrapolated"]);
  return out;
}

// A unit priced far past the shapes the calibration timed: the MLP's layer lines carried to a
// 1024-wide layer (before the fifty-third session's two default MLPs), a GPT block wider than
// any timed one (priced at the widest's cost per work: width 768 +14% at 512's).
nlohmann::json extrapolation_json(const std::string& model, const plan::Cluster& c) {
  const auto x = plan::extrapolated_unit(plan::ModelSpec::parse(model), c);
  if (!x) return nullptr;
  return {{"unit", x->unit}, {"kind", x->kind}, {"params", x->params}, {"largest_timed_params", x->largest_timed_params},
          {"calibrate", "dtrain bench calibrate --models '" + model + "'"}};
}

std::string extrapolation_words(const nlohmann::json& x) {
  char ext[512];
  std::snprintf(ext, sizeof ext,
                "its %s (%.0f parameters) is priced past the largest unit of its kind the calibration timed (%.0f): "
                "`%s` times this model's own",
                x.value("unit", std::string()).c_str(), x.value("params", 0.0), x.value("largest_timed_params", 0.0),
                x.value("calibrate", std::string()).c_str());
  return ext;
}

}  // namespace dtrain::cli
