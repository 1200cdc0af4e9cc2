// train/progress.h — what a training run prints while it runs.
//
// Contract
// - On a terminal (tty = true) one status line is redrawn in place with '\r', at most 10
//   times a second: epoch e/E, a bar, examples done, running loss and accuracy, examples/s
//   and the ETA of the whole run, plus the last finished epoch's test accuracy. When the epoch ends the line is replaced by the epoch's
//   summary and a newline.
// - Otherwise (a pipe or file) only the per-epoch summary lines are printed, so logs stay
//   readable.
// - A null stream prints nothing.
// Thread-safety: one thread (the trainer's).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace dtrain {

struct EpochRow {
  int64_t epoch = 0;  // 1-based (a round for step-driven runs)
  float lr = 0;
  double train_loss = 0, train_accuracy = 0;
  double test_loss = 0, test_accuracy = 0;
  double seconds = 0;
  double examples_per_second = 0;
  // Strategy metrics for this epoch (consensus distance, staleness, ...); not checkpointed.
  std::vector<std::pair<std::string, double>> extra;
};

class Progress {
 public:
  // `per_epoch` units (`unit`: "ex" for examples, "steps" for step rounds) make one round;
  // without `accuracy` only losses are printed (the GPT).
  Progress(std::FILE* out, bool tty, int64_t epochs, int64_t per_epoch, const char* unit = "ex", bool accuracy = true,
           const char* word = "epoch");
  void begin_epoch(int64_t epoch);  // 1-based
  void update(int64_t done, double loss);
  void end_epoch(const EpochRow& row, bool has_test);
  void message(const std::string& line);

 private:
  std::FILE* out_;
  bool tty_;
  int64_t epochs_, per_epoch_;
  const char* unit_;
  bool accuracy_;
  const char* word_;  // what a line counts: "epoch" or "round"
  int64_t epoch_ = 0;
  double epoch_start_ = 0, last_draw_ = 0, run_start_ = 0;
  int64_t epochs_done_in_run_ = 0;
  double last_test_acc_ = -1;
};

// True when the stream is a terminal (isatty on its descriptor).
bool is_tty(std::FILE* f);

}  // namespace dtrain
