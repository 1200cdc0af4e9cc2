#include "plan/plan_measure.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/median.h"

namespace dtrain::plan {

std::vector<std::string> train_args(const std::string& model, const Layout& l, int64_t batch, const std::string& data,
                                    int64_t steps) {
  bool gpt = model.rfind("gpt", 0) == 0;
  std::vector<std::string> a{"train", "--model", model, "-n", std::to_string(l.ranks()), "--batch", std::to_string(batch)};
  std::string s = l.strategy == "single" && l.ranks() > 1 ? "ddp" : l.strategy;
  a.insert(a.end(), {"--strategy", s});
  if (!data.empty()) a.insert(a.end(), {"--data", data});
  if (!l.optimizer.empty()) a.insert(a.end(), {"--optimizer", l.optimizer});
  if (gpt) {
    a.insert(a.end(), {"--steps", std::to_string(steps), "--eval-batches", "1"});
    if (s == "hybrid") a.insert(a.end(), {"--dp", std::to_string(l.dp), "--tp", std::to_string(l.tp), "--pp", std::to_string(l.pp)});
    if (l.zero > 0 || s == "zero") a.insert(a.end(), {"--zero", std::to_string(l.zero)});
    if (l.pp > 1)
      a.insert(a.end(), {"--microbatches", std::to_string(l.micro), "--schedule", l.schedule, "--virtual-stages",
                         std::to_string(l.virtual_stages)});
    if (l.recompute) a.push_back("--recompute");
  } else {
    a.insert(a.end(), {"--epochs", "1"});
    // Always said: the MLP's ddp defaults to --zero 1 (train/config.cc).
    if (s == "ddp" && l.ranks() > 1) a.insert(a.end(), {"--zero", std::to_string(l.zero)});
    if (s == "ps") a.insert(a.end(), {"--servers", std::to_string(l.servers)});
    if (s == "localsgd") a.insert(a.end(), {"--sync-every", std::to_string(l.sync_every)});
  }
  if (l.dp > 1 && s == "ddp" && !gpt) {  // the GPT's strategies take no --bucket-mb
    std::ostringstream b;
    b << l.bucket_mb;
    a.insert(a.end(), {"--bucket-mb", b.str()});
    if (l.shared_params >= 0) a.insert(a.end(), {"--shared-params", l.shared_params ? "on" : "off"});
    if (l.batch_split >= 0) a.insert(a.end(), {"--batch-split", l.batch_split ? "measured" : "even"});
  }
  return a;
}

double steady_step_s(const nlohmann::json& run, int64_t batch) {
  std::vector<double> per_round;  // seconds per item of each round
  double secs = 0, items = 0;     // over the rounds after the first
  if (run.contains("epoch_rows") && run["epoch_rows"].is_array())
    for (const auto& row : run["epoch_rows"]) {
      const double eps = row.value("examples_per_second", 0.0);
      if (eps > 0) per_round.push_back(1 / eps);
      if (eps > 0 && per_round.size() > 1) secs += row.value("seconds", 0.0), items += eps * row.value("seconds", 0.0);
    }
  // fedavg's rounds differ by design (each samples other clients, with other amounts of data:
  // 103k-203k examples/s between rounds of one run), so its steady rate is the later rounds'
  // time over their examples, which the planner predicts for the same rounds.
  if (run.value("strategy", std::string()) == "fedavg" && items > 0) return secs / items * static_cast<double>(batch);
  if (per_round.size() >= 2) {
    std::vector<double> later(per_round.begin() + 1, per_round.end());
    std::sort(later.begin(), later.end());
    const size_t k = later.size();
    const double mid = k % 2 ? later[k / 2] : (later[k / 2 - 1] + later[k / 2]) / 2;
    return mid * static_cast<double>(batch);
  }
  const double eps = run.value("examples_per_second", 0.0);
  return eps > 0 ? static_cast<double>(batch) / eps : 0;
}

namespace {
std::string self_exe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  DT_CHECK(n > 0, Error, "cannot find the dtrain binary (/proc/self/exe)");
  return std::string(buf, n);
}
std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}
}  // namespace

Measured measure_layout(const std::string& model, const Layout& l, int64_t batch, const std::string& data, int64_t steps) {
  char tmpl[] = "/tmp/dtrain_plan_XXXXXX";
  int fd = mkstemp(tmpl);
  DT_CHECK(fd >= 0, IoError, "cannot create a temporary file for the measured run's JSON");
  close(fd);
  std::string cmd = quote(self_exe());
  for (const auto& a : train_args(model, l, batch, data, steps)) cmd += " " + quote(a);
  cmd += " --quiet --json " + quote(tmpl) + " >/dev/null";
  int rc = std::system(cmd.c_str());
  std::ifstream in(tmpl);
  nlohmann::json j;
  bool ok = rc == 0 && in.good();
  if (ok) {
    try {
      j = nlohmann::json::parse(in);
    } catch (const std::exception&) {
      ok = false;
    }
  }
  std::remove(tmpl);
  DT_CHECK(ok, Error, "measured run failed (exit " << rc << "): " << cmd);
  Measured m;
  m.steps = j.value("steps", int64_t{0});
  m.train_seconds = j.value("train_seconds", 0.0);
  DT_CHECK(m.steps > 0, Error, "measured run reported no steps: " << cmd);
  m.mean_step_s = m.train_seconds / m.steps;
  m.step_s = steady_step_s(j, batch);
  if (m.step_s <= 0) m.step_s = m.mean_step_s;
  if (j.contains("prediction") && j["prediction"].is_object())
    m.predicted_step_s = j["prediction"].value("step_ms", 0.0) * 1e-3;
  m.shm_cores = j.value("shm_cores", std::string());
  return m;
}

void summarise(LayoutRuns& r) {
  DT_CHECK(!r.runs.empty(), InvalidArgument, "a measured layout without runs");
  std::vector<double> steps;
  for (const Measured& m : r.runs) steps.push_back(m.step_s);
  r.median_s = median(steps, "measured runs");
  r.min_s = *std::min_element(steps.begin(), steps.end());
  r.max_s = *std::max_element(steps.begin(), steps.end());
}

std::vector<LayoutRuns> measure_layouts(const std::string& model, const std::vector<Layout>& layouts, int64_t batch,
                                        const std::string& data, int64_t steps, int repeats,
                                        const std::function<void(int round, size_t index, const Measured&)>& on_run) {
  DT_CHECK(repeats >= 1, InvalidArgument, "--repeats " << repeats << ": run each layout at least once");
  std::vector<LayoutRuns> out(layouts.size());
  for (int round = 0; round < repeats; ++round)
    for (size_t k = 0; k < layouts.size(); ++k) {
      const size_t i = round % 2 ? layouts.size() - 1 - k : k;
      out[i].runs.push_back(measure_layout(model, layouts[i], batch, data, steps));
      if (on_run) on_run(round, i, out[i].runs.back());
    }
  for (LayoutRuns& r : out) summarise(r);
  return out;
}

MeasuredVerdict judge_measured(const std::vector<LayoutRuns>& runs) {
  DT_CHECK(!runs.empty(), InvalidArgument, "no measured layouts to judge");
  MeasuredVerdict v;
  for (size_t i = 1; i < runs.size(); ++i)
    if (runs[i].median_s < runs[v.fastest].median_s) v.fastest = i;
  const LayoutRuns &chosen = runs[0], &best = runs[v.fastest];
  v.chosen_excess = chosen.median_s / best.median_s - 1;
  v.judged = v.fastest != 0 && chosen.runs.size() >= 2 && best.runs.size() >= 2;
  v.apart = v.judged && chosen.min_s > best.max_s;
  return v;
}

}  // namespace dtrain::plan
