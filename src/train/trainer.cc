#include "train/trainer.h"

#include <unistd.h>

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <sstream>

#include "base/clock.h"
#include "base/heap_stats.h"
#include "base/thread_pool.h"
#include "base/error.h"
#include "coll/collectives.h"
#include "data/file_reader.h"
#include "data/sampler.h"
#include "train/checkpoint.h"

namespace dtrain {
namespace {

constexpr int kRowFields = 8;

std::vector<float> rows_to_floats(const std::vector<EpochRow>& rows) {
  // Stored as float pairs would lose precision; pack doubles bit-exactly into float storage.
  std::vector<double> d;
  for (const auto& r : rows)
    d.insert(d.end(), {static_cast<double>(r.epoch), static_cast<double>(r.lr), r.train_loss, r.train_accuracy,
                       r.test_loss, r.test_accuracy, r.seconds, r.examples_per_second});
  std::vector<float> f(d.size() * 2);
  std::memcpy(f.data(), d.data(), d.size() * sizeof(double));
  return f;
}

std::vector<EpochRow> rows_from_floats(const std::vector<float>& f) {
  DT_CHECK(f.size() % (2 * kRowFields) == 0, Corrupt, "checkpoint history has a bad size");
  std::vector<double> d(f.size() / 2);
  std::memcpy(d.data(), f.data(), d.size() * sizeof(double));
  std::vector<EpochRow> rows;
  for (size_t i = 0; i < d.size(); i += kRowFields) {
    EpochRow r;
    r.epoch = static_cast<int64_t>(d[i]);
    r.lr = static_cast<float>(d[i + 1]);
    r.train_loss = d[i + 2];
    r.train_accuracy = d[i + 3];
    r.test_loss = d[i + 4];
    r.test_accuracy = d[i + 5];
    r.seconds = d[i + 6];
    r.examples_per_second = d[i + 7];
    rows.push_back(r);
  }
  return rows;
}

void make_dirs(const std::string& dir) {
  std::string partial;
  std::stringstream ss(dir);
  std::string piece;
  if (!dir.empty() && dir[0] == '/') partial = "/";
  while (std::getline(ss, piece, '/')) {
    if (piece.empty()) continue;
    partial += piece + "/";
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      int err = errno;
      DT_THROW(IoError, "cannot create checkpoint directory '" << partial << "': " << errno_string(err));
    }
  }
}

}  // namespace

Trainer::Trainer(Strategy& strategy, TrainOptions options) : strategy_(strategy), opt_(std::move(options)) {
  DT_CHECK(opt_.batch >= 1, InvalidArgument, "--batch must be >= 1, got " << opt_.batch);
  DT_CHECK(!opt_.resume || !opt_.checkpoint_dir.empty(), InvalidArgument,
           "--resume needs --checkpoint DIR (the directory holding the checkpoints)");
  if (by_steps()) {
    DT_CHECK(opt_.steps >= 1, InvalidArgument, "--steps must be >= 1 for " << strategy_.describe() << ", got " << opt_.steps);
    DT_CHECK(opt_.round_steps >= 0, InvalidArgument, "--eval-every must be >= 1, got " << opt_.round_steps);
    if (opt_.round_steps == 0) opt_.round_steps = std::max<int64_t>(1, opt_.steps / 10);
    rounds_ = (opt_.steps + opt_.round_steps - 1) / opt_.round_steps;
  } else {
    DT_CHECK(opt_.epochs >= 1, InvalidArgument, "--epochs must be >= 1, got " << opt_.epochs);
    DT_CHECK(opt_.round_steps >= 0, InvalidArgument, "--checkpoint-every must be >= 1, got " << opt_.round_steps);
    if (opt_.round_steps > 0) {
      DT_CHECK(strategy_.splits_epochs(), InvalidArgument,
               "--checkpoint-every cuts epochs into parts, but an epoch of --strategy " << strategy_.name()
                                                                                        << " is one indivisible round; checkpoints come every epoch");
      const int64_t steps_per_epoch = (strategy_.examples_per_epoch() + opt_.batch - 1) / opt_.batch;
      parts_ = (steps_per_epoch + opt_.round_steps - 1) / opt_.round_steps;
    }
    rounds_ = opt_.epochs * parts_;
  }
}

std::string Trainer::checkpoint_path() const {
  if (!distributed()) return opt_.checkpoint_dir + "/checkpoint.dtc";
  return opt_.checkpoint_dir + "/checkpoint.rank-" + std::to_string(opt_.comm->rank()) + ".dtc";
}

namespace {
std::string prev_path(const std::string& path) { return path.substr(0, path.size() - 4) + ".prev.dtc"; }

int64_t rounds_in(const std::string& path) {
  if (!data::file_exists(path)) return -1;
  auto p = Checkpoint::load(path).get_u64s("progress");
  DT_CHECK(p.size() == 3, Corrupt, "checkpoint '" << path << "': bad progress section");
  return static_cast<int64_t>(p[0]);
}
}  // namespace

std::string Trainer::fingerprint() const {
  std::ostringstream os;
  os << strategy_.describe() << ", batch " << opt_.batch << ", seed " << opt_.seed;
  if (by_steps()) os << ", " << opt_.steps << " steps";
  if (!by_steps() && parts_ > 1) os << ", epochs in parts of " << opt_.round_steps << " steps";
  if (distributed()) os << ", strategy " << opt_.strategy << " on " << opt_.comm->size() << " ranks";
  if (distributed() || by_steps()) os << ", rank " << (opt_.comm ? opt_.comm->rank() : 0);
  return os.str();
}

void Trainer::save(int64_t rounds_done, const std::vector<EpochRow>& rows) const {
  Checkpoint ck;
  ck.put_string("fingerprint", fingerprint());
  const uint64_t progress[] = {static_cast<uint64_t>(rounds_done), static_cast<uint64_t>(strategy_.steps()), opt_.seed};
  ck.put_u64s("progress", progress);
  ck.put_floats("history", rows_to_floats(rows));
  ck.put_string("strategy", opt_.strategy);
  StateSections state;
  strategy_.save(state);
  for (auto& [name, bytes] : state) ck.put("s." + name, bytes);
  make_dirs(opt_.checkpoint_dir);
  const std::string path = checkpoint_path();
  // Keep the previous generation: a rank may die after some ranks saved this round. The
  // previous file becomes a second name (a hard link) of the current one, and ck.save then
  // replaces the current name atomically, so at every instant `path` holds a whole checkpoint
  // (a rename to the previous name first left a window, between it and the save, with none:
  // a rank killed there could not resume).
  if (distributed() && data::file_exists(path)) {
    const std::string prev = prev_path(path);
    if ((::unlink(prev.c_str()) != 0 && errno != ENOENT) || ::link(path.c_str(), prev.c_str()) != 0) {
      int err = errno;
      DT_THROW(IoError, "cannot keep the previous checkpoint '" << path << "' as '" << prev << "': " << errno_string(err));
    }
  }
  ck.save(path);
}

int64_t Trainer::restore(std::vector<EpochRow>& rows) {
  std::string path = checkpoint_path();
  if (distributed()) {
    // Agree on the newest round every rank has: min over ranks of each rank's newest.
    const int64_t cur = rounds_in(path), prev = rounds_in(prev_path(path));
    int64_t newest = std::max(cur, prev);
    int64_t agreed = newest;
    allreduce(*opt_.comm, &agreed, 1, DType::kInt64, ReduceOp::kMin);
    if (agreed < 0 && opt_.resume_if_present) return 0;  // some rank has none: start over
    DT_CHECK(agreed >= 0, IoError,
             "--resume: rank " << opt_.comm->rank() << (newest < 0 ? " has" : ": some rank has")
                               << " no checkpoint in '" << opt_.checkpoint_dir
                               << "'; run once without --resume to create them");
    if (cur != agreed) {
      DT_CHECK(prev == agreed, Corrupt,
               "--resume: rank " << opt_.comm->rank() << " has checkpoints of rounds " << cur << " and " << prev
                                 << " but the ranks agree on round " << agreed << "; the checkpoints in '"
                                 << opt_.checkpoint_dir << "' come from different runs");
      path = prev_path(path);
    }
  }
  if (!distributed() && opt_.resume_if_present && !data::file_exists(path)) return 0;
  DT_CHECK(data::file_exists(path), IoError,
           "--resume: no checkpoint at '" << path << "'; run once without --resume to create it");
  Checkpoint ck = Checkpoint::load(path);
  const std::string theirs = ck.get_string("fingerprint"), ours = fingerprint();
  DT_CHECK(theirs == ours, InvalidArgument,
           "checkpoint '" << path << "' was written for [" << theirs << "] but this run is [" << ours
                          << "]; use the same model, data, optimizer, batch, seed and layout, or another --checkpoint DIR");
  StateSections state;
  for (const std::string& name : ck.names())
    if (name.rfind("s.", 0) == 0) state.emplace_back(name.substr(2), ck.get(name));
  strategy_.load(state);
  auto progress = ck.get_u64s("progress");
  DT_CHECK(progress.size() == 3, Corrupt, "checkpoint '" << path << "': bad progress section");
  rows = rows_from_floats(ck.get_floats("history"));
  return static_cast<int64_t>(progress[0]);
}

Round Trainer::round(int64_t r, std::vector<int64_t>& order) const {
  Round rd;
  rd.index = r;
  rd.batch = opt_.batch;
  if (by_steps()) {
    rd.first_step = r * opt_.round_steps;
    rd.steps = std::min(opt_.round_steps, opt_.steps - rd.first_step);
  } else {
    rd.epoch = r / parts_;
    rd.part = r % parts_;
    if (rd.part == 0 || order.empty()) order = data::epoch_permutation(strategy_.examples_per_epoch(), opt_.seed, rd.epoch);
    const int64_t n = static_cast<int64_t>(order.size()), per = parts_ > 1 ? opt_.round_steps * opt_.batch : n;
    const int64_t first = std::min(n, rd.part * per), last = std::min(n, first + per);
    rd.order = std::span<const int64_t>(order).subspan(static_cast<size_t>(first), static_cast<size_t>(last - first));
    rd.steps = (last - first + opt_.batch - 1) / opt_.batch;
  }
  return rd;
}

TrainReport Trainer::run() {
  const double run_start = now_seconds();
  TrainReport rep;
  rep.classifies = strategy_.classifies();
  int64_t first_round = 0;
  if (opt_.resume || (opt_.resume_if_present && !opt_.checkpoint_dir.empty())) first_round = restore(rep.epochs);
  rep.resumed_from_epoch = first_round;
  ThreadPool eval_pool(opt_.threads);
  const int64_t per_round = by_steps() ? opt_.round_steps
                                       : parts_ > 1 ? opt_.round_steps * opt_.batch : strategy_.examples_per_epoch();
  Progress progress(opt_.out, opt_.tty, rounds_, per_round, by_steps() ? "steps" : "ex", rep.classifies,
                    by_steps() || parts_ > 1 ? "round" : "epoch");
  if (first_round > 0)
    progress.message("resumed from '" + checkpoint_path() + "' after " + (by_steps() || parts_ > 1 ? "round " : "epoch ") +
                     std::to_string(first_round));
  if (first_round >= rounds_) rep.test = strategy_.evaluate(&eval_pool);

  int64_t ran = 0, eval_kept = 0;
  std::vector<int64_t> order;
  for (int64_t e = first_round; e < rounds_; ++e) {
    if (opt_.stop_after_rounds >= 0 && ran >= opt_.stop_after_rounds) break;
    progress.begin_epoch(e + 1);
    const Round rd = round(e, order);
    strategy_.begin_round(rd);
    // The high-water mark of training alone: evaluation's buffers are not a step's. What the
    // evaluations between rounds left live (their cached activations: 25 MB for the MLP on
    // Fashion-MNIST's test set) is taken off each round's mark; what training itself keeps
    // from round to round stays in it. (Counting each round from its own start instead took
    // off what a round's step allocated after its high-water mark and kept: ZeRO-1's
    // reduce-scatter buffers, 2.5 x the parameters at 2 ranks, were never counted in GPT runs
    // of one step a round, and gpt-zero1 at 2 ranks read 120.7 MB where it holds 130.)
    heap_reset_peak();
    const double t0 = now_seconds();
    LossAcc tr = strategy_.train_round(rd, [&](int64_t done, double loss) { progress.update(done, loss); });
    const double secs = now_seconds() - t0;
    rep.train_heap_peak = std::max(rep.train_heap_peak, heap_stats().peak - eval_kept);
    rep.train_seconds += secs;
    rep.examples += tr.examples;
    DT_CHECK(std::isfinite(tr.loss), Error,
             "training diverged in round " << e + 1 << " (loss " << tr.loss << "); lower --lr");
    Metrics extra = strategy_.round_metrics();
    const int64_t live_before_eval = heap_stats().live;
    rep.test = strategy_.evaluate(&eval_pool);
    eval_kept += std::max<int64_t>(0, heap_stats().live - live_before_eval);
    EpochRow row;
    row.extra = std::move(extra);
    row.epoch = e + 1;
    row.train_loss = tr.loss;
    row.train_accuracy = tr.accuracy();
    row.test_loss = rep.test.loss;
    row.test_accuracy = rep.test.accuracy();
    row.seconds = secs;
    row.examples_per_second = secs > 0 ? static_cast<double>(tr.examples) / secs : 0;
    rep.epochs.push_back(row);
    progress.end_epoch(row, true);
    if (!opt_.checkpoint_dir.empty()) save(e + 1, rep.epochs);
    ++ran;
  }
  if (!opt_.checkpoint_dir.empty()) strategy_.finish(opt_.checkpoint_dir);
  rep.steps = strategy_.steps();
  if (const Instrument* inst = strategy_.instrument()) rep.split = inst->totals();
  rep.wall_seconds = now_seconds() - run_start;
  rep.examples_per_second = rep.train_seconds > 0 ? static_cast<double>(rep.examples) / rep.train_seconds : 0;
  return rep;
}

}  // namespace dtrain
