// HOGWILD! scaling on a real dataset, one command: plain HOGWILD!, the locking baseline and
// hogwild-hot at 1 and 2 threads (or --threads LIST), each trained from zero for --epochs
// epochs per run, runs interleaved over --reps repetitions (A B C A B C ...) so that drift in
// the machine's load hits every configuration alike. Reports per configuration the median
// training examples/s (only run_epoch is timed: no loading, no evaluation), its speedup over
// one thread of the same method and over serial SGD (plain hogwild, 1 thread), and the test
// accuracy and loss after the last run, and the cores the runs got (process CPU time over wall
// time, median): a 2-thread run that got 1.3 cores was measured on a busy machine. Not a
// Google Benchmark: its own main.
//
//   export DTRAIN_DATA_DIR=../shared/data
//   build/bin/hogwild_scaling_bench --data news20 --model softmax --normalize --lr 0.5 --epochs 10 --reps 5
//   build/bin/hogwild_scaling_bench --data a9a --model logreg --lr 0.01 --epochs 50 --reps 5
//   (bench/hogwild_scaling.sh runs both)
//
// Why many epochs per run: one news20 epoch lasts ~30 ms and an a9a epoch ~5 ms, too short to
// time one by one on a shared machine; a run of E epochs is timed as a whole.
//
// --frequency-order renumbers the features by frequency first (renumber_by_frequency below),
// and the header names the data "<data>_by_frequency".
//
// --each prints every run as it ends (a configuration whose runs differ by rep, not by
// noise, shows there: two threads' scratch on one cache line made every run after a
// process's first 35% slower, parallel/hogwild_hot.cc).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "data/registry.h"
#include "data/sampler.h"
#include "parallel/hogwild.h"
#include "parallel/hogwild_hot.h"

namespace {

struct Options {
  std::string data = "news20", model = "softmax", methods = "hogwild,hogwild-lock,hogwild-hot", threads = "1,2";
  bool normalize = false, average = true, each = false, frequency_order = false;
  float lr = 0.5f;
  int64_t epochs = 10, reps = 5, batch = 1, hot_features = -1, merge_every = 4096;
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) out.push_back(x);
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--data") o.data = value();
    else if (a == "--model") o.model = value();
    else if (a == "--methods") o.methods = value();
    else if (a == "--threads") o.threads = value();
    else if (a == "--normalize") o.normalize = true;
    else if (a == "--each") o.each = true;
    else if (a == "--frequency-order") o.frequency_order = true;
    else if (a == "--hot-merge") {
      const std::string v = value();
      if (v != "average" && v != "sum") throw std::runtime_error("--hot-merge takes average or sum, not '" + v + "'");
      o.average = v == "average";
    } else if (a == "--lr") o.lr = std::stof(value());
    else if (a == "--epochs") o.epochs = std::stoll(value());
    else if (a == "--reps") o.reps = std::stoll(value());
    else if (a == "--batch") o.batch = std::stoll(value());
    else if (a == "--hot-features") o.hot_features = std::stoll(value());
    else if (a == "--merge-every") o.merge_every = std::stoll(value());
    else
      throw std::runtime_error("unknown option '" + a +
                               "' (see the comment at the top of bench/hogwild_scaling_bench.cc)");
  }
  if (o.epochs < 1 || o.reps < 1 || o.batch < 1) throw std::runtime_error("--epochs, --reps and --batch must be >= 1");
  return o;
}

// Renumbers the features by how many training rows they occur in, most frequent first (in
// train and test alike), and re-sorts each row's nonzeros by the new numbers. The model is the
// same up to the order of its rows, and so is SGD's arithmetic per coordinate; what changes is
// the layout: the frequent features' rows lie together, as hogwild-hot's per-thread copy puts
// them, instead of spread over the whole model (--frequency-order: serial SGD with that layout
// too, to check the comparison; on news20 it read the same, docs/ACCURACY.md).
void renumber_by_frequency(dtrain::data::DataSplit& split) {
  const std::vector<int64_t> counts = dtrain::feature_row_counts(split.train);
  std::vector<int32_t> by_count(counts.size());
  for (size_t j = 0; j < by_count.size(); ++j) by_count[j] = static_cast<int32_t>(j);
  std::stable_sort(by_count.begin(), by_count.end(), [&](int32_t a, int32_t b) { return counts[a] > counts[b]; });
  std::vector<int32_t> new_id(counts.size());
  for (size_t r = 0; r < by_count.size(); ++r) new_id[static_cast<size_t>(by_count[r])] = static_cast<int32_t>(r);
  for (dtrain::data::Dataset* ds : {&split.train, &split.test}) {
    std::vector<std::pair<int32_t, float>> row;
    for (int64_t i = 0; i < ds->rows; ++i) {
      const auto b = static_cast<size_t>(ds->row_ptr[static_cast<size_t>(i)]);
      const auto e = static_cast<size_t>(ds->row_ptr[static_cast<size_t>(i) + 1]);
      row.clear();
      for (size_t n = b; n < e; ++n) row.emplace_back(new_id[static_cast<size_t>(ds->col_idx[n])], ds->values[n]);
      std::sort(row.begin(), row.end());
      for (size_t n = b; n < e; ++n) std::tie(ds->col_idx[n], ds->values[n]) = row[n - b];
    }
    ds->validate();
  }
}

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Result {
  std::vector<double> rates;
  std::vector<double> cores;  // CPU seconds / wall seconds of each run: did it have its cores?
  dtrain::LossAcc test;
  std::string describe;
};

std::unique_ptr<dtrain::ModelStrategy> make(const std::string& method, int threads, dtrain::TrainableModel& model,
                                            const float* lr, const Options& o) {
  if (method == "hogwild")
    return std::make_unique<dtrain::Hogwild>(model, lr, threads, dtrain::Hogwild::Mode::kLockFree);
  if (method == "hogwild-lock")
    return std::make_unique<dtrain::Hogwild>(model, lr, threads, dtrain::Hogwild::Mode::kLocked);
  if (method == "hogwild-hot")
    return std::make_unique<dtrain::HogwildHot>(
        model, lr, dtrain::HogwildHotOptions{threads, o.hot_features, o.merge_every, o.average});
  throw std::runtime_error("unknown method '" + method + "' (hogwild, hogwild-lock, hogwild-hot)");
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  dtrain::data::DataSplit split = dtrain::data::load_dataset(o.data);
  if (o.normalize) {
    dtrain::data::normalize_rows(split.train);
    dtrain::data::normalize_rows(split.test);
  }
  if (o.frequency_order) renumber_by_frequency(split);
  const dtrain::SparseLoss loss = dtrain::parse_sparse_loss(o.model);
  std::vector<std::pair<std::string, int>> configs;
  for (const auto& m : split_list(o.methods))
    for (const auto& t : split_list(o.threads)) configs.emplace_back(m, std::stoi(t));
  std::printf(
      "hogwild_scaling_bench: %s (%lld train x %lld features, %lld test), %s, lr %g, batch %lld, %lld epochs per run, "
      "%lld reps\n",
      (o.data + (o.frequency_order ? "_by_frequency" : "")).c_str(), static_cast<long long>(split.train.rows), static_cast<long long>(split.train.cols),
      static_cast<long long>(split.test.rows), o.model.c_str(), o.lr, static_cast<long long>(o.batch),
      static_cast<long long>(o.epochs), static_cast<long long>(o.reps));
  std::printf("load average at start: %s\n", loadavg().c_str());
  std::map<std::pair<std::string, int>, Result> results;
  for (int64_t rep = 0; rep < o.reps; ++rep)
    for (const auto& cfg : configs) {
      auto model = dtrain::make_sparse_model(loss, split.train);
      float lr = o.lr;
      auto s = make(cfg.first, cfg.second, *model, &lr, o);
      double seconds = 0;
      const double cpu0 = cpu_seconds();
      for (int64_t e = 0; e < o.epochs; ++e) {
        const auto order = dtrain::data::epoch_permutation(split.train.rows, 0, e);
        const auto t0 = std::chrono::steady_clock::now();
        s->run_epoch(order, o.batch, nullptr);
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
      Result& r = results[cfg];
      r.rates.push_back(static_cast<double>(split.train.rows * o.epochs) / seconds);
      r.cores.push_back((cpu_seconds() - cpu0) / seconds);
      r.test = model->evaluate(split.test.rows > 0 ? split.test : split.train);
      r.describe = s->describe();
      if (o.each)
        std::printf("run %s x%d rep %lld: %.0f ex/s, %.2f cores\n", cfg.first.c_str(), cfg.second,
                    static_cast<long long>(rep), r.rates.back(), r.cores.back());
    }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  };
  const auto serial_it = results.find({"hogwild", 1});
  const double serial = serial_it != results.end() ? median(serial_it->second.rates) : 0.0;
  std::printf(
      "\n| method | threads | examples/s (median) | min - max | vs 1 thread, same method | vs serial SGD | cores used "
      "| test acc | test loss |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const auto& cfg : configs) {
    const Result& r = results[cfg];
    const double m = median(r.rates);
    const auto one = results.find({cfg.first, 1});
    const double base = one != results.end() ? median(one->second.rates) : 0.0;
    std::printf("| %s | %d | %.0f | %.0f - %.0f | %s | %s | %.2f | %.4f | %.4f |\n", cfg.first.c_str(), cfg.second, m,
                *std::min_element(r.rates.begin(), r.rates.end()), *std::max_element(r.rates.begin(), r.rates.end()),
                base > 0 ? (std::to_string(m / base).substr(0, 4) + "x").c_str() : "-",
                serial > 0 ? (std::to_string(m / serial).substr(0, 4) + "x").c_str() : "-", median(r.cores),
                r.test.accuracy(), r.test.loss);
  }
  for (const auto& cfg : configs)
    if (cfg.first == "hogwild-hot" && cfg.second > 1) {
      std::printf("\nhogwild-hot: %s\n", results[cfg].describe.c_str());
      break;
    }
  std::printf("load average at end: %s\n", loadavg().c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "hogwild_scaling_bench: %s\n", e.what());
  return 2;
}
