// train/report.h — what a training run reports at its end: the JSON document, the summary
// lines, every rank's time split and the gathered timeline.
//
// Contract
// - gather_splits(comm, mine): every rank's TimeSplit, in rank order, on every rank (an
//   all-gather; all ranks must call it). With no communicator, just {mine}.
// - gather_trace(comm, timeline, path): rank 0 writes every rank's events to `path` as a
//   Chrome trace (trace/timeline.h); all ranks must call it.
// - report_json(...) builds the --json document. Keys: strategy, world_size, threads, model,
//   model_description, parameters, dataset, train_examples, test_examples, optimizer, lr,
//   batch, epochs, seed, normalize, test_accuracy, test_loss, metrics_on,
//   examples_per_second, wall_seconds, train_seconds, steps, resumed_from_epoch,
//   target_accuracy/epochs_to_target (when asked), epoch_rows[{epoch, lr, train_loss,
//   train_accuracy, test_loss, test_accuracy, seconds, examples_per_second, + strategy
//   metrics}], and for distributed strategies ranks[{rank, compute_seconds, comm_seconds,
//   wait_seconds, comm_bytes, hidden_fraction}], compute_seconds/comm_seconds/wait_seconds
//   (max over ranks) and hidden_fraction (communication-weighted mean).
// - add_baseline(json, ranks, eps_n, eps_1): speedup S = eps_n / eps_1, efficiency S / N and
//   the Amdahl serial fraction f solving S = 1 / (f + (1 - f) / N), i.e. f = (N/S - 1)/(N - 1).
// Thread-safety: call from the training thread.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/config.h"
#include "coll/communicator.h"
#include "data/dataset.h"
#include "parallel/instrument.h"
#include "trace/timeline.h"
#include "train/strategies.h"
#include "train/trainer.h"

namespace dtrain {

std::vector<TimeSplit> gather_splits(Communicator* comm, const TimeSplit& mine);
void gather_trace(Communicator* comm, const trace::Timeline& timeline, const std::string& path);

// Forwards Instrument spans into a Timeline (the bridge between parallel/ and trace/).
class TimelineSink : public EventSink {
 public:
  explicit TimelineSink(trace::Timeline& t) : timeline_(t) {}
  void span(int track, const std::string& name, SpanKind kind, double t0, double t1, const std::string& args) override;

 private:
  trace::Timeline& timeline_;
};

nlohmann::json report_json(const TrainConfig& f, const TrainJob& job, const TrainReport& r,
                           const std::vector<TimeSplit>& splits, int world, const Metrics& stats);
void print_summary(std::FILE* out, const TrainConfig& f, const TrainJob& job, const TrainReport& r,
                   const std::vector<TimeSplit>& splits, bool distributed);
void write_json_file(const std::string& path, const nlohmann::json& j);
nlohmann::json read_json_file(const std::string& path);

struct Scaling {
  double speedup = 0, efficiency = 0, serial_fraction = 0;
};
Scaling scaling(int ranks, double eps_n, double eps_1);
// The first 1-based epoch whose test accuracy reaches `target`, or -1.
int64_t epochs_to_target(const TrainReport& r, double target);

}  // namespace dtrain
