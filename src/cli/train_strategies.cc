#include "cli/train_strategies.h"

#include <sstream>

#include "base/error.h"
#include "parallel/hogwild.h"
#include "parallel/threads.h"

namespace dtrain::cli {
namespace {

void single_process(const TrainFlags& f) {
  DT_CHECK(f.ranks == 1, InvalidArgument,
           "--strategy " << f.strategy << " runs in one process; drop -n/--ranks " << f.ranks
                         << " (use --threads for more threads)");
}

void plain_sgd_only(const TrainFlags& f) {
  single_process(f);
  DT_CHECK(f.optimizer == "sgd", InvalidArgument,
           "--strategy " << f.strategy << " applies plain SGD updates without locks; --optimizer " << f.optimizer
                         << " keeps shared state (momentum/moments) it cannot update safely: use --optimizer sgd");
  DT_CHECK(f.weight_decay == 0.0f, InvalidArgument,
           "--strategy " << f.strategy << " does not apply --weight-decay; use --l2 with a sparse model instead");
}

std::unique_ptr<LocalStrategy> make_hogwild(TrainableModel& m, const float* lr, const TrainOptions& o,
                                            Hogwild::Mode mode) {
  return std::make_unique<Hogwild>(m, lr, o.threads, mode);
}

}  // namespace

const std::vector<StrategyEntry>& strategies() {
  static const std::vector<StrategyEntry> table = {
      {"single", "one thread, minibatch SGD/Adam, whole-batch gradients (the fast reference)",
       [](const TrainFlags& f) {
         single_process(f);
         DT_CHECK(f.threads == 1, InvalidArgument,
                  "--strategy single uses one thread; for --threads " << f.threads << " use --strategy threads");
       },
       [](TrainableModel& m, Optimizer& opt, const float*, const TrainOptions&) -> std::unique_ptr<LocalStrategy> {
         // One shard: the whole minibatch in one gemm. (threads uses 8 fixed shards so that
         // every T gives the same bits; with T = 1 that only costs time.)
         return std::make_unique<SyncThreads>(m, opt, 1, /*shards=*/1);
       }},
      {"threads", "each minibatch split over --threads T, gradients summed in a fixed order (bit-identical for any T <= 8)",
       single_process,
       [](TrainableModel& m, Optimizer& opt, const float*, const TrainOptions& o) -> std::unique_ptr<LocalStrategy> {
         return std::make_unique<SyncThreads>(m, opt, o.threads);
       }},
      {"hogwild", "HOGWILD!: --threads T run SGD on one shared model without locks (Niu et al. 2011)", plain_sgd_only,
       [](TrainableModel& m, Optimizer&, const float* lr, const TrainOptions& o) {
         return make_hogwild(m, lr, o, Hogwild::Mode::kLockFree);
       }},
      {"hogwild-lock", "the locking baseline: like hogwild, one mutex around every update", plain_sgd_only,
       [](TrainableModel& m, Optimizer&, const float* lr, const TrainOptions& o) {
         return make_hogwild(m, lr, o, Hogwild::Mode::kLocked);
       }},
  };
  return table;
}

const StrategyEntry& find_strategy(const std::string& name) {
  for (const auto& s : strategies())
    if (s.name == name) return s;
  std::ostringstream names;
  for (const auto& s : strategies()) names << (names.tellp() ? ", " : "") << s.name;
  DT_THROW(InvalidArgument, "unknown --strategy '" << name << "'; this build has: " << names.str());
}

std::string strategies_help() {
  std::ostringstream os;
  os << "\nstrategies:\n";
  for (const auto& s : strategies()) {
    os << "  " << s.name << std::string(s.name.size() < 14 ? 14 - s.name.size() : 1, ' ') << s.help << "\n";
  }
  return os.str();
}

}  // namespace dtrain::cli
