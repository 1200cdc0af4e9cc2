// cli/train_cmd.cc — `dtrain train`: flags -> data -> model -> strategy -> Trainer -> report.
//
// Output: progress on stdout (a redrawn line on a terminal, one line per epoch otherwise),
// then one summary line; with --json FILE the run's results as JSON (schema below).
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/train_flags.h"
#include "cli/train_strategies.h"
#include "data/registry.h"
#include "nn/mlp.h"
#include "tensor/blas.h"

namespace dtrain::cli {
namespace {

OptimizerConfig optimizer_config(const TrainFlags& f) {
  OptimizerConfig c;
  c.lr = effective_lr(f);
  c.weight_decay = f.weight_decay;
  if (f.optimizer == "momentum" || f.optimizer == "nesterov") {
    c.kind = "sgd";
    c.momentum = f.momentum;
    c.nesterov = f.optimizer == "nesterov";
  } else {
    c.kind = f.optimizer;
  }
  return c;
}

bool is_mlp(const std::string& m) { return m == "mlp" || m.rfind("mlp:", 0) == 0; }

// Checked before the data is loaded, so a typo fails in milliseconds.
void check_model_flag(const std::string& m) {
  DT_CHECK(is_mlp(m) || m == "logreg" || m == "svm" || m == "softmax", InvalidArgument,
           "unknown --model '" << m << "'; use mlp:784-256-128-10 (any widths), logreg, svm or softmax");
  if (is_mlp(m) && m.size() > 4) MLP::parse_spec(m.substr(4));
}

std::unique_ptr<TrainableModel> build_model(const TrainFlags& f, const data::Dataset& train) {
  const std::string& m = f.model;
  if (is_mlp(m)) {
    std::string spec = m.size() > 4 ? m.substr(4) : "";
    if (spec.empty()) spec = std::to_string(train.cols) + "-256-128-" + std::to_string(train.num_classes);
    return make_mlp_model(spec, train, f.seed);
  }
  if (m == "logreg" || m == "svm" || m == "softmax") return make_sparse_model(parse_sparse_loss(m), train, f.l2);
  DT_THROW(InvalidArgument, "unknown --model '" << m << "'; use mlp:784-256-128-10 (any widths), logreg, svm or softmax");
}

// JSON schema: strategy, world_size, threads, model, dataset, optimizer, lr, batch, epochs,
// seed, test_accuracy, test_loss, examples_per_second, wall_seconds, train_seconds,
// resumed_from_epoch, epoch_rows[{epoch, lr, train_loss, train_accuracy, test_loss,
// test_accuracy, seconds, examples_per_second}].
void write_json(const std::string& path, const TrainFlags& f, const TrainableModel& model, const data::DataSplit& d,
                const TrainReport& r) {
  nlohmann::json j;
  j["strategy"] = f.strategy;
  j["world_size"] = f.ranks;
  j["threads"] = f.threads;
  j["model"] = f.model;
  j["model_description"] = model.describe();
  j["parameters"] = model.num_params();
  j["dataset"] = f.data;
  j["train_examples"] = d.train.rows;
  j["test_examples"] = r.test_is_train ? 0 : d.test.rows;
  j["optimizer"] = f.optimizer;
  j["lr"] = effective_lr(f);
  j["batch"] = f.batch;
  j["epochs"] = f.epochs;
  j["seed"] = f.seed;
  j["normalize"] = f.normalize;
  j["test_accuracy"] = r.test.accuracy();
  j["test_loss"] = r.test.loss;
  j["metrics_on"] = r.test_is_train ? "train" : "test";
  j["examples_per_second"] = r.examples_per_second;
  j["wall_seconds"] = r.wall_seconds;
  j["train_seconds"] = r.train_seconds;
  j["steps"] = r.steps;
  j["resumed_from_epoch"] = r.resumed_from_epoch;
  auto& rows = j["epoch_rows"] = nlohmann::json::array();
  for (const auto& e : r.epochs)
    rows.push_back({{"epoch", e.epoch},
                    {"lr", e.lr},
                    {"train_loss", e.train_loss},
                    {"train_accuracy", e.train_accuracy},
                    {"test_loss", e.test_loss},
                    {"test_accuracy", e.test_accuracy},
                    {"seconds", e.seconds},
                    {"examples_per_second", e.examples_per_second}});
  std::ofstream out(path);
  DT_CHECK(out.good(), IoError, "cannot write --json file '" << path << "'");
  out << j.dump(2) << "\n";
  DT_CHECK(out.good(), IoError, "error writing --json file '" << path << "'");
}

}  // namespace

int train_main(const Args& args) {
  const TrainFlags f = parse_train_flags(args);
  if (f.help) {
    std::printf("%s%s\ndatasets:\n  %s\n", train_usage("").c_str(), strategies_help().c_str(),
                data::dataset_help().c_str());
    return 0;
  }
  const StrategyEntry& strategy = find_strategy(f.strategy);
  strategy.validate(f);
  check_model_flag(f.model);
  // Replicas call gemm from several threads at once, and bit-identical results need a fixed
  // BLAS thread count: parallelism comes from the strategy, not from BLAS.
  set_blas_threads(1);

  data::DataSplit split = data::load_dataset(f.data);
  if (f.normalize) {
    data::normalize_rows(split.train);
    data::normalize_rows(split.test);
  }
  std::unique_ptr<TrainableModel> model = build_model(f, split.train);
  FILE* out = f.quiet ? nullptr : stdout;
  if (out) {
    std::fprintf(out, "data: %s | test: %s\nmodel: %s | strategy %s, %d thread(s), %s lr %g, batch %lld\n",
                 split.train.describe().c_str(), split.test.rows ? split.test.describe().c_str() : "none",
                 model->describe().c_str(), f.strategy.c_str(), f.threads, f.optimizer.c_str(), effective_lr(f),
                 static_cast<long long>(f.batch));
    std::fflush(out);
  }
  TrainOptions o;
  o.strategy = f.strategy;
  o.threads = f.threads;
  o.epochs = f.epochs;
  o.batch = f.batch;
  o.optimizer = optimizer_config(f);
  o.seed = f.seed;
  o.checkpoint_dir = f.checkpoint;
  o.resume = f.resume;
  o.out = out;
  o.tty = is_tty(stdout);
  Trainer trainer(*model, &split.test, o, strategy.make);
  TrainReport r = trainer.run();
  std::printf("%s: %s_accuracy %.4f %s_loss %.4f | %.0f examples/s | wall %.2fs\n", f.strategy.c_str(),
              r.test_is_train ? "train" : "test", r.test.accuracy(), r.test_is_train ? "train" : "test", r.test.loss,
              r.examples_per_second, r.wall_seconds);
  if (!f.json.empty()) write_json(f.json, f, *model, split, r);
  return 0;
}

}  // namespace dtrain::cli
