#include "train/report.h"

#include <algorithm>
#include <fstream>

#include "base/error.h"
#include "coll/collectives.h"
#include "nn/transformer.h"

namespace dtrain {

std::vector<TimeSplit> gather_splits(Communicator* comm, const TimeSplit& mine) {
  if (comm == nullptr || comm->size() == 1) return {mine};
  const double v[5] = {mine.compute_seconds, mine.comm_seconds, mine.wait_seconds,
                       static_cast<double>(mine.comm_bytes), static_cast<double>(mine.comm_calls)};
  std::vector<double> all(5 * static_cast<size_t>(comm->size()));
  allgather(*comm, v, all.data(), 5, DType::kFloat64);
  std::vector<TimeSplit> out(static_cast<size_t>(comm->size()));
  for (size_t r = 0; r < out.size(); ++r) {
    out[r].compute_seconds = all[5 * r];
    out[r].comm_seconds = all[5 * r + 1];
    out[r].wait_seconds = all[5 * r + 2];
    out[r].comm_bytes = static_cast<int64_t>(all[5 * r + 3]);
    out[r].comm_calls = static_cast<int64_t>(all[5 * r + 4]);
  }
  return out;
}

void gather_trace(Communicator* comm, const trace::Timeline& timeline, const std::string& path) {
  const std::string mine = trace::serialize(timeline.events());
  if (comm == nullptr || comm->size() == 1) {
    trace::write_chrome_trace(path, trace::parse(mine), 1);
    return;
  }
  const int n = comm->size();
  int64_t len = static_cast<int64_t>(mine.size());
  std::vector<int64_t> lens(static_cast<size_t>(n));
  allgather(*comm, &len, lens.data(), 1, DType::kInt64);
  std::vector<size_t> counts(lens.begin(), lens.end());
  size_t total = 0;
  for (size_t c : counts) total += c;
  std::string all(total, '\0');
  allgatherv(*comm, mine.data(), all.data(), counts, DType::kUInt8);
  if (comm->rank() != 0) return;
  std::vector<trace::Event> events;
  size_t off = 0;
  for (size_t c : counts) {
    auto part = trace::parse(all.substr(off, c));
    events.insert(events.end(), part.begin(), part.end());
    off += c;
  }
  trace::write_chrome_trace(path, events, n);
}

void TimelineSink::span(int track, const std::string& name, SpanKind kind, double t0, double t1,
                        const std::string& args) {
  const char* cat = kind == SpanKind::kCompute ? "compute" : (kind == SpanKind::kComm ? "comm" : "wait");
  timeline_.add(track, name, cat, t0, t1, args);
}

Scaling scaling(int ranks, double eps_n, double eps_1) {
  Scaling s;
  if (eps_1 <= 0 || ranks < 1) return s;
  s.speedup = eps_n / eps_1;
  s.efficiency = s.speedup / ranks;
  s.serial_fraction = ranks > 1 && s.speedup > 0 ? (ranks / s.speedup - 1.0) / (ranks - 1.0) : 0.0;
  return s;
}

int64_t epochs_to_target(const TrainReport& r, double target) {
  for (const auto& e : r.epochs)
    if (e.test_accuracy >= target) return e.epoch;
  return -1;
}

nlohmann::json report_json(const TrainConfig& f, const TrainJob& job, const TrainReport& r,
                           const std::vector<TimeSplit>& splits, int world, const Metrics& strategy_stats) {
  nlohmann::json j;
  const bool on_train = job.model && job.split.test.rows == 0;
  j["strategy"] = f.strategy;
  j["world_size"] = world;
  j["threads"] = f.threads;
  j["model"] = f.model;
  j["model_description"] = job.model ? job.model->describe() : job.strategy->describe();
  j["dataset"] = f.data;
  if (job.model) {
    j["parameters"] = job.model->num_params();
    j["train_examples"] = job.split.train.rows;
    j["test_examples"] = on_train ? 0 : job.split.test.rows;
  } else {
    j["text_chars"] = job.text.ids.size();
    j["vocab"] = job.text.vocab.size();
  }
  j["optimizer"] = f.optimizer;
  j["lr"] = effective_lr(f);
  j["batch"] = f.batch;
  if (job.model) j["epochs"] = f.epochs;
  else j["steps_requested"] = f.steps;
  j["seed"] = f.seed;
  j["normalize"] = f.normalize;
  if (r.classifies) j["test_accuracy"] = r.test.accuracy();
  j["test_loss"] = r.test.loss;
  j["metrics_on"] = !r.classifies ? "validation" : on_train ? "train" : "test";
  j["examples_per_second"] = r.examples_per_second;
  j["wall_seconds"] = r.wall_seconds;
  j["train_seconds"] = r.train_seconds;
  j["steps"] = r.steps;
  j["resumed_from_epoch"] = r.resumed_from_epoch;
  nlohmann::json stats = nlohmann::json::object();
  for (const auto& [k, v] : strategy_stats) stats[k] = v;
  if (!stats.empty()) j["stats"] = stats;
  if (f.target_accuracy > 0) {
    j["target_accuracy"] = f.target_accuracy;
    j["epochs_to_target"] = epochs_to_target(r, f.target_accuracy);
  }
  auto& rows = j["epoch_rows"] = nlohmann::json::array();
  for (const auto& e : r.epochs) {
    nlohmann::json row = {{"epoch", e.epoch},
                          {"lr", e.lr},
                          {"train_loss", e.train_loss},
                          {"train_accuracy", e.train_accuracy},
                          {"test_loss", e.test_loss},
                          {"test_accuracy", e.test_accuracy},
                          {"seconds", e.seconds},
                          {"examples_per_second", e.examples_per_second}};
    for (const auto& [k, v] : e.extra) row[k] = v;
    rows.push_back(row);
  }
  if (world > 1 || f.strategy == "ddp") {
    auto& ranks = j["ranks"] = nlohmann::json::array();
    double cmax = 0, mmax = 0, wmax = 0, comm_sum = 0, hidden_sum = 0;
    for (size_t i = 0; i < splits.size(); ++i) {
      const TimeSplit& s = splits[i];
      ranks.push_back({{"rank", i},
                       {"compute_seconds", s.compute_seconds},
                       {"comm_seconds", s.comm_seconds},
                       {"wait_seconds", s.wait_seconds},
                       {"comm_bytes", s.comm_bytes},
                       {"comm_calls", s.comm_calls},
                       {"hidden_fraction", s.hidden_fraction()}});
      cmax = std::max(cmax, s.compute_seconds);
      mmax = std::max(mmax, s.comm_seconds);
      wmax = std::max(wmax, s.wait_seconds);
      comm_sum += s.comm_seconds;
      hidden_sum += s.hidden_fraction() * s.comm_seconds;
    }
    j["compute_seconds"] = cmax;
    j["comm_seconds"] = mmax;
    j["wait_seconds"] = wmax;
    j["hidden_fraction"] = comm_sum > 0 ? hidden_sum / comm_sum : 0.0;
  }
  return j;
}

namespace {

// ddp's straggler figures (parallel/stragglers.h), from the epoch rows: the mean rank's wait
// for each step's slowest compute, averaged over the epochs, against the measured step; and
// which rank was slowest how often in the last epoch, read as one slow rank or the host's
// noise (each rank by turns).
void print_stragglers(std::FILE* out, const TrainReport& r, int ranks) {
  double ms = 0;
  int rows = 0, slowest = -1;
  double share = 0;
  for (const auto& e : r.epochs)
    for (const auto& [k, v] : e.extra) {
      if (k == "straggler_wait_ms") ms += v, ++rows;
      if (k == "slowest_rank") slowest = static_cast<int>(v);
      if (k == "slowest_rank_share") share = v;
    }
  if (rows == 0 || ranks < 2 || r.steps <= 0) return;
  ms /= rows;
  const double step_ms = 1e3 * r.train_seconds / static_cast<double>(r.steps);
  // One rank slowest in 80% of the steps or more (with many ranks, 1.5x its even share at the
  // least) is one slow rank; under halfway from the even share to always, the ranks by turns.
  const double even = 1.0 / ranks;
  const char* kind = share >= std::max(0.8, 1.5 * even)
                         ? "one slow rank (give it less of each batch: --batch-split measured, or weights)"
                     : share < (1 + even) / 2 ? "the ranks by turns (their cores' speed wanders: no one rank to move work off)"
                                              : "mostly that rank";
  std::fprintf(out,
               "stragglers: the ranks waited %.2f ms a step (%.0f%% of the %.2f ms step) for the step's slowest compute; "
               "in the last epoch rank %d was the slowest in %.0f%% of the steps: %s\n",
               ms, step_ms > 0 ? 100 * ms / step_ms : 0.0, step_ms, slowest, 100 * share, kind);
}

}  // namespace

void print_summary(std::FILE* out, const TrainConfig& f, const TrainJob& job, const TrainReport& r,
                   const std::vector<TimeSplit>& splits, bool distributed) {
  if (!r.classifies) {
    std::fprintf(out, "%s: trained %lld steps, val_loss %.4f | %.1f sequences/s (%.0f tokens/s), %.1f ms/step | wall %.2fs\n",
                 f.strategy.c_str(), static_cast<long long>(r.steps), r.test.loss, r.examples_per_second,
                 r.examples_per_second * static_cast<double>(GptConfig::parse(f.model, 256).context),
                 r.examples > 0 ? 1e3 * r.train_seconds * static_cast<double>(f.batch) / static_cast<double>(r.examples) : 0.0,
                 r.wall_seconds);
    std::fputs(job.strategy->summary().c_str(), out);
  } else {
    const char* on = job.split.test.rows == 0 ? "train" : "test";
    std::fprintf(out, "%s: %s_accuracy %.4f %s_loss %.4f | %.0f examples/s | wall %.2fs\n", f.strategy.c_str(), on,
                 r.test.accuracy(), on, r.test.loss, r.examples_per_second, r.wall_seconds);
  }
  if (f.target_accuracy > 0 && r.classifies) {
    const int64_t e = epochs_to_target(r, f.target_accuracy);
    std::fprintf(out, "target accuracy %.4f: %s\n", f.target_accuracy,
                 e < 0 ? "not reached" : ("reached in epoch " + std::to_string(e)).c_str());
  }
  if (!distributed) return;
  std::fprintf(out, "rank  compute_s  comm_s  wait_s  hidden  comm_MB\n");
  for (size_t i = 0; i < splits.size(); ++i) {
    const TimeSplit& s = splits[i];
    std::fprintf(out, "%4zu  %9.2f  %6.2f  %6.2f  %5.0f%%  %7.1f\n", i, s.compute_seconds, s.comm_seconds,
                 s.wait_seconds, 100 * s.hidden_fraction(), static_cast<double>(s.comm_bytes) / 1e6);
  }
  print_stragglers(out, r, static_cast<int>(splits.size()));
  std::fflush(out);
}

void write_json_file(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path);
  DT_CHECK(out.good(), IoError, "cannot write --json file '" << path << "'");
  out << j.dump(2) << "\n";
  DT_CHECK(out.good(), IoError, "error writing --json file '" << path << "'");
}

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  DT_CHECK(in.good(), IoError, "cannot read '" << path << "'");
  try {
    return nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    DT_THROW(Corrupt, "'" << path << "' is not valid JSON: " << e.what());
  }
}

}  // namespace dtrain
