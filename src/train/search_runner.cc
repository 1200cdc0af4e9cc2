// cli/train_search.cc — the whole-job strategies: parallel hyper-parameter search and
// ensembles. Both train independent models (the `single` strategy: one thread, whole-batch
// gradients) spread round-robin over the ranks (parallel/search.h), with no communication
// until the end, when one all-reduce gathers the results on every rank and rank 0 prints.
//   search:   a grid (--search) or --trials N random configurations; a table ranked by test
//             accuracy.
//   ensemble: --members K models with seeds seed, seed+1, ...; the ensemble predicts the
//             argmax of the members' averaged class probabilities; reported beside the
//             members' own accuracies.
#include "train/search_runner.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "base/error.h"
#include "coll/collectives.h"
#include "parallel/search.h"
#include "parallel/threads.h"
#include "train/trainer.h"

namespace dtrain {
namespace {

struct Outcome {
  LossAcc test;
  double seconds = 0;
};

std::string mlp_dims(const TrainConfig& f, const data::Dataset& train) {
  if (f.model.size() > 4) return f.model.substr(4);
  return std::to_string(train.cols) + "-256-128-" + std::to_string(train.num_classes);
}

// Trains one independent model on this rank (strategy single) and scores it.
Outcome train_one(const TrainConfig& f, const data::DataSplit& d, const std::string& dims, uint64_t seed,
                  std::unique_ptr<TrainableModel>* keep = nullptr) {
  auto model = make_mlp_model(dims, d.train, seed);
  auto opt = make_optimizer(optimizer_config(f), model->num_params());
  SyncThreads strategy(*model, *opt, 1, 1);
  strategy.set_eval_set(d.test.rows > 0 ? &d.test : nullptr);
  TrainOptions o;
  o.strategy = "single";
  o.epochs = f.epochs;
  o.batch = f.batch;
  o.seed = seed;
  o.out = nullptr;
  TrainReport r = Trainer(strategy, o).run();
  if (keep) *keep = std::move(model);
  return Outcome{r.test, r.train_seconds};
}

void check_mlp(const TrainConfig& f) {
  DT_CHECK(f.model == "mlp" || f.model.rfind("mlp:", 0) == 0, InvalidArgument,
           "--strategy " << f.strategy << " trains MLPs; use --model mlp:784-256-128-10 (any widths)");
}

}  // namespace

nlohmann::json run_search(const TrainConfig& f, Communicator& comm, const data::DataSplit& d, std::FILE* out) {
  check_mlp(f);
  const std::vector<Trial> trials = f.trials > 0 ? random_trials(f.trials, f.seed) : parse_search_grid(f.search);
  const auto n = static_cast<int64_t>(trials.size());
  std::vector<double> res(static_cast<size_t>(n) * 3, 0.0);  // accuracy, loss, seconds
  for (int64_t i : trials_of_rank(n, comm.rank(), comm.size())) {
    const Trial& t = trials[static_cast<size_t>(i)];
    TrainConfig g = f;
    if (t.lr > 0) g.lr = static_cast<float>(t.lr);
    if (t.batch > 0) g.batch = t.batch;
    if (!g.lr) g.lr = effective_lr(f);  // the run's lr even if the optimizer kind changes below
    if (t.momentum >= 0) {
      g.momentum = static_cast<float>(t.momentum);
      if (g.optimizer == "sgd" || g.optimizer == "momentum") g.optimizer = t.momentum > 0 ? "momentum" : "sgd";
    }
    std::string dims = mlp_dims(f, d.train);
    if (t.width > 0) dims = apply_width(dims, t.width);
    Outcome o = train_one(g, d, dims, f.seed);
    res[static_cast<size_t>(i) * 3] = o.test.accuracy();
    res[static_cast<size_t>(i) * 3 + 1] = o.test.loss;
    res[static_cast<size_t>(i) * 3 + 2] = o.seconds;
    if (out)
      std::fprintf(out, "trial %lld/%lld on rank %d: %s -> test_accuracy %.4f (%.1fs)\n", static_cast<long long>(i + 1),
                  static_cast<long long>(n), comm.rank(), t.describe().c_str(), o.test.accuracy(), o.seconds);
    if (out) std::fflush(out);
  }
  AllreduceOptions ao;
  ao.deterministic = true;
  allreduce(comm, res.data(), res.size(), DType::kFloat64, ReduceOp::kSum, ao);
  if (comm.rank() != 0) return nlohmann::json::object();
  std::vector<int64_t> rank(static_cast<size_t>(n));
  std::iota(rank.begin(), rank.end(), 0);
  std::stable_sort(rank.begin(), rank.end(), [&](int64_t a, int64_t b) { return res[a * 3] > res[b * 3]; });
  if (out) std::fprintf(out, "search: %lld trials on %d rank(s), %lld epoch(s) each, ranked by test accuracy\n",
              static_cast<long long>(n), comm.size(), static_cast<long long>(f.epochs));
  if (out) std::fprintf(out, "rank  trial  test_acc  test_loss  seconds  configuration\n");
  nlohmann::json rows = nlohmann::json::array();
  for (size_t k = 0; k < rank.size(); ++k) {
    const auto i = static_cast<size_t>(rank[k]);
    if (out) std::fprintf(out, "%4zu  %5zu  %8.4f  %9.4f  %7.1f  %s\n", k + 1, i + 1, res[i * 3], res[i * 3 + 1], res[i * 3 + 2],
                trials[i].describe().c_str());
    rows.push_back({{"trial", i + 1}, {"configuration", trials[i].describe()}, {"test_accuracy", res[i * 3]},
                    {"test_loss", res[i * 3 + 1]}, {"seconds", res[i * 3 + 2]}});
  }
  return {{"strategy", "search"}, {"world_size", comm.size()}, {"epochs", f.epochs},
          {"best", rows.empty() ? nlohmann::json() : rows[0]}, {"trials", rows}};
}

nlohmann::json run_ensemble(const TrainConfig& f, Communicator& comm, const data::DataSplit& d, std::FILE* out) {
  check_mlp(f);
  const int k = f.members > 0 ? f.members : comm.size();
  const data::Dataset& eval = d.test.rows > 0 ? d.test : d.train;
  const size_t classes = static_cast<size_t>(d.train.num_classes);
  std::vector<float> probs(static_cast<size_t>(eval.rows) * classes, 0.0f);
  std::vector<double> acc(static_cast<size_t>(k) * 2, 0.0);
  for (int64_t m : trials_of_rank(k, comm.rank(), comm.size())) {
    std::unique_ptr<TrainableModel> model;
    Outcome o = train_one(f, d, mlp_dims(f, d.train), f.seed + static_cast<uint64_t>(m), &model);
    const std::vector<float> p = model->probabilities(eval);
    for (size_t i = 0; i < p.size(); ++i) probs[i] += p[i];
    acc[static_cast<size_t>(m) * 2] = o.test.accuracy();
    acc[static_cast<size_t>(m) * 2 + 1] = o.test.loss;
    if (out)
      std::fprintf(out, "member %lld/%d on rank %d (seed %llu): test_accuracy %.4f\n", static_cast<long long>(m + 1), k,
                  comm.rank(), static_cast<unsigned long long>(f.seed + static_cast<uint64_t>(m)), o.test.accuracy());
    if (out) std::fflush(out);
  }
  AllreduceOptions ao;
  ao.deterministic = true;
  allreduce(comm, probs.data(), probs.size(), DType::kFloat32, ReduceOp::kSum, ao);
  allreduce(comm, acc.data(), acc.size(), DType::kFloat64, ReduceOp::kSum, ao);
  if (comm.rank() != 0) return nlohmann::json::object();
  int64_t correct = 0;
  for (int64_t i = 0; i < eval.rows; ++i) {
    const float* row = probs.data() + static_cast<size_t>(i) * classes;
    correct += (std::max_element(row, row + classes) - row) == eval.labels[static_cast<size_t>(i)];
  }
  const double ens = static_cast<double>(correct) / static_cast<double>(eval.rows);
  double mean = 0, best = 0;
  for (int m = 0; m < k; ++m) {
    mean += acc[static_cast<size_t>(m) * 2] / k;
    best = std::max(best, acc[static_cast<size_t>(m) * 2]);
  }
  if (out) std::fprintf(out, "ensemble of %d: test_accuracy %.4f | members: mean %.4f, best %.4f (+%.4f over the mean)\n", k, ens,
              mean, best, ens - mean);
  {
    nlohmann::json members = nlohmann::json::array();
    for (int m = 0; m < k; ++m) members.push_back({{"member", m}, {"seed", f.seed + static_cast<uint64_t>(m)},
                                                   {"test_accuracy", acc[static_cast<size_t>(m) * 2]},
                                                   {"test_loss", acc[static_cast<size_t>(m) * 2 + 1]}});
    return {{"strategy", "ensemble"}, {"world_size", comm.size()}, {"members", members},
            {"test_accuracy", ens}, {"member_mean_accuracy", mean}, {"member_best_accuracy", best}};
  }
}

}  // namespace dtrain
