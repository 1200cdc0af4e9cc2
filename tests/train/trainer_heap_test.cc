// The trainer's heap high-water mark of training (TrainReport::train_heap_peak): what the
// steps hold at their worst, including what training keeps from one round to the next, but
// not what evaluation between rounds leaves behind.
#include <gtest/gtest.h>

#include <vector>

#include "base/heap_stats.h"
#include "parallel/strategy.h"
#include "train/trainer.h"

namespace dtrain {
namespace {

constexpr size_t kActivations = 4 << 20;  // bytes a step holds at its high-water mark, then frees
constexpr size_t kKept = 2 << 20;         // a buffer the first step allocates after its mark and keeps
constexpr size_t kEvalCache = 3 << 20;    // what evaluation allocates and keeps

// A strategy over sampled data (one step a round): each step allocates and frees its
// activations; the first step's end allocates a buffer training keeps (as ZeRO's
// reduce-scatter buffers); each evaluation allocates a cache it keeps.
class HeapStrategy : public Strategy {
 public:
  const char* name() const override { return "heap"; }
  std::string describe() const override { return "heap"; }
  int64_t examples_per_epoch() const override { return 0; }
  bool classifies() const override { return false; }
  LossAcc train_round(const Round& round, const ProgressFn&) override {
    for (int64_t s = 0; s < round.steps; ++s) {
      activations_.assign(kActivations, 1);
      std::vector<char>().swap(activations_);
      if (kept_.empty()) kept_.assign(kKept, 1);
      ++steps_;
    }
    LossAcc r;
    r.loss = 1, r.examples = round.steps;
    return r;
  }
  LossAcc evaluate(ThreadPool*) override {
    caches_.emplace_back(kEvalCache, 1);
    LossAcc r;
    r.loss = 1, r.examples = 1;
    return r;
  }
  int64_t steps() const override { return steps_; }
  void save(StateSections&) const override {}
  void load(const StateSections&) override {}

 private:
  std::vector<char> activations_, kept_;
  std::vector<std::vector<char>> caches_;
  int64_t steps_ = 0;
};

TEST(TrainerHeap, CountsWhatTrainingKeepsAndNotWhatEvaluationKeeps) {
  const int64_t before = heap_stats().live;
  HeapStrategy strategy;
  TrainOptions o;
  o.steps = 3, o.round_steps = 1, o.out = nullptr;
  Trainer trainer(strategy, o);
  const TrainReport rep = trainer.run();
  ASSERT_EQ(rep.epochs.size(), 3u);
  // Rounds 2 and 3 hold the kept buffer beside their activations, and two and then three
  // evaluation caches, which are not training's. Whatever else the trainer keeps (its rows,
  // the report) is far below a megabyte.
  const int64_t peak = rep.train_heap_peak - before;
  EXPECT_GE(peak, static_cast<int64_t>(kActivations + kKept));
  EXPECT_LT(peak, static_cast<int64_t>(kActivations + kKept + kEvalCache) - (1 << 20));
}

}  // namespace
}  // namespace dtrain
