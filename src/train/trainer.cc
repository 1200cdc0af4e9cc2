#include "train/trainer.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "base/clock.h"
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

Trainer::Trainer(TrainableModel& model, const data::Dataset* test, TrainOptions options, StrategyFactory factory)
    : model_(model), test_(test), opt_(std::move(options)), factory_(std::move(factory)), lr_(opt_.optimizer.lr) {
  DT_CHECK(opt_.epochs >= 1, InvalidArgument, "--epochs must be >= 1, got " << opt_.epochs);
  DT_CHECK(opt_.batch >= 1, InvalidArgument, "--batch must be >= 1, got " << opt_.batch);
  DT_CHECK(!opt_.resume || !opt_.checkpoint_dir.empty(), InvalidArgument,
           "--resume needs --checkpoint DIR (the directory holding checkpoint.dtc)");
  optimizer_ = make_optimizer(opt_.optimizer, model_.num_params());
}

std::string Trainer::checkpoint_path() const {
  if (!distributed()) return opt_.checkpoint_dir + "/checkpoint.dtc";
  return opt_.checkpoint_dir + "/checkpoint.rank-" + std::to_string(opt_.comm->rank()) + ".dtc";
}

namespace {
std::string prev_path(const std::string& path) { return path.substr(0, path.size() - 4) + ".prev.dtc"; }

int64_t epochs_in(const std::string& path) {
  if (!data::file_exists(path)) return -1;
  auto p = Checkpoint::load(path).get_u64s("progress");
  DT_CHECK(p.size() == 3, Corrupt, "checkpoint '" << path << "': bad progress section");
  return static_cast<int64_t>(p[0]);
}
}  // namespace

std::string Trainer::fingerprint() const {
  const auto& tr = model_.train_set();
  std::ostringstream os;
  os << model_.describe() << " on " << tr.source << " (" << tr.rows << " x " << tr.cols << "), optimizer "
     << optimizer_->kind() << ", batch " << opt_.batch << ", seed " << opt_.seed;
  if (distributed()) os << ", strategy " << opt_.strategy << " on " << opt_.comm->size() << " ranks";
  return os.str();
}

void Trainer::save(int64_t epochs_done, const std::vector<EpochRow>& rows, const LocalStrategy* strategy) const {
  Checkpoint ck;
  ck.put_string("fingerprint", fingerprint());
  ck.put_floats("params", model_.params());
  ck.put("optimizer", optimizer_->save_state());
  const uint64_t progress[] = {static_cast<uint64_t>(epochs_done), static_cast<uint64_t>(optimizer_->steps()), opt_.seed};
  ck.put_u64s("progress", progress);
  ck.put_floats("history", rows_to_floats(rows));
  ck.put_string("strategy", opt_.strategy);
  if (strategy) ck.put("strategy_state", strategy->save_state());
  make_dirs(opt_.checkpoint_dir);
  const std::string path = checkpoint_path();
  // Keep the previous generation: a rank may die after some ranks saved this epoch.
  if (distributed() && data::file_exists(path) && std::rename(path.c_str(), prev_path(path).c_str()) != 0) {
    int err = errno;
    DT_THROW(IoError, "cannot keep the previous checkpoint '" << path << "': " << errno_string(err));
  }
  ck.save(path);
}

int64_t Trainer::restore(std::vector<EpochRow>& rows, std::vector<uint8_t>* strategy_state) {
  std::string path = checkpoint_path();
  if (distributed()) {
    // Agree on the newest epoch every rank has: min over ranks of each rank's newest.
    const int64_t cur = epochs_in(path), prev = epochs_in(prev_path(path));
    int64_t newest = std::max(cur, prev);
    int64_t agreed = newest;
    allreduce(*opt_.comm, &agreed, 1, DType::kInt64, ReduceOp::kMin);
    DT_CHECK(agreed >= 0, IoError,
             "--resume: rank " << opt_.comm->rank() << (newest < 0 ? " has" : ": some rank has")
                               << " no checkpoint in '" << opt_.checkpoint_dir
                               << "'; run once without --resume to create them");
    if (cur != agreed) {
      DT_CHECK(prev == agreed, Corrupt,
               "--resume: rank " << opt_.comm->rank() << " has checkpoints of epochs " << cur << " and " << prev
                                 << " but the ranks agree on epoch " << agreed << "; the checkpoints in '"
                                 << opt_.checkpoint_dir << "' come from different runs");
      path = prev_path(path);
    }
  }
  DT_CHECK(data::file_exists(path), IoError,
           "--resume: no checkpoint at '" << path << "'; run once without --resume to create it");
  Checkpoint ck = Checkpoint::load(path);
  const std::string theirs = ck.get_string("fingerprint"), ours = fingerprint();
  DT_CHECK(theirs == ours, InvalidArgument,
           "checkpoint '" << path << "' was written for [" << theirs << "] but this run is [" << ours
                          << "]; use the same model, data, optimizer, batch and seed, or another --checkpoint DIR");
  std::vector<float> params = ck.get_floats("params");
  DT_CHECK_EQ(static_cast<int64_t>(params.size()), model_.num_params(), Corrupt,
              "checkpoint '" << path << "' parameter count");
  std::copy(params.begin(), params.end(), model_.params().begin());
  const auto& state = ck.get("optimizer");
  optimizer_->load_state(state);
  auto progress = ck.get_u64s("progress");
  DT_CHECK(progress.size() == 3, Corrupt, "checkpoint '" << path << "': bad progress section");
  rows = rows_from_floats(ck.get_floats("history"));
  if (strategy_state && ck.has("strategy_state")) *strategy_state = ck.get("strategy_state");
  return static_cast<int64_t>(progress[0]);
}

TrainReport Trainer::run() {
  const double run_start = now_seconds();
  TrainReport rep;
  const data::Dataset& train = model_.train_set();
  const bool has_test = test_ != nullptr && test_->rows > 0;
  const data::Dataset& eval_set = has_test ? *test_ : train;
  rep.test_is_train = !has_test;

  int64_t first_epoch = 0;
  std::vector<uint8_t> strategy_state;
  if (opt_.resume) first_epoch = restore(rep.epochs, &strategy_state);
  rep.resumed_from_epoch = first_epoch;
  optimizer_->set_lr(lr_);
  std::unique_ptr<LocalStrategy> strategy = factory_(model_, *optimizer_, &lr_, opt_);
  if (!strategy_state.empty()) strategy->load_state(strategy_state);
  ThreadPool eval_pool(opt_.threads);
  Progress progress(opt_.out, opt_.tty, opt_.epochs, train.rows);
  if (first_epoch > 0)
    progress.message("resumed from '" + checkpoint_path() + "' after epoch " + std::to_string(first_epoch));
  if (first_epoch >= opt_.epochs) rep.test = strategy->evaluate(model_, eval_set, &eval_pool);

  int64_t ran = 0;
  for (int64_t e = first_epoch; e < opt_.epochs; ++e) {
    if (opt_.stop_after_epochs >= 0 && ran >= opt_.stop_after_epochs) break;
    progress.begin_epoch(e + 1);
    strategy->begin_epoch(e);
    const std::vector<int64_t> order = data::epoch_permutation(train.rows, opt_.seed, e);
    const double t0 = now_seconds();
    LossAcc tr = strategy->run_epoch(order, opt_.batch, [&](int64_t done, double loss) { progress.update(done, loss); });
    const double secs = now_seconds() - t0;
    rep.train_seconds += secs;
    rep.examples += tr.examples;
    DT_CHECK(std::isfinite(tr.loss), Error,
             "training diverged in epoch " << e + 1 << " (loss " << tr.loss << "); lower --lr (now " << lr_ << ")");
    std::vector<std::pair<std::string, double>> extra = strategy->epoch_metrics();
    rep.test = strategy->evaluate(model_, eval_set, &eval_pool);
    EpochRow row;
    row.extra = std::move(extra);
    row.epoch = e + 1;
    row.lr = lr_;
    row.train_loss = tr.loss;
    row.train_accuracy = tr.accuracy();
    row.test_loss = rep.test.loss;
    row.test_accuracy = rep.test.accuracy();
    row.seconds = secs;
    row.examples_per_second = secs > 0 ? static_cast<double>(tr.examples) / secs : 0;
    rep.epochs.push_back(row);
    progress.end_epoch(row, true);
    if (!opt_.checkpoint_dir.empty()) save(e + 1, rep.epochs, strategy.get());
    ++ran;
  }
  rep.steps = optimizer_->steps();
  if (const Instrument* inst = strategy->instrument()) rep.split = inst->totals();
  rep.wall_seconds = now_seconds() - run_start;
  rep.examples_per_second = rep.train_seconds > 0 ? static_cast<double>(rep.examples) / rep.train_seconds : 0;
  return rep;
}

}  // namespace dtrain
