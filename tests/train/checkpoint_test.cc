// Checkpoint files: round trip, atomic replacement, and refusal of damaged files; the
// trainer's resume reproduces an uninterrupted run exactly.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "data/rng.h"
#include "train/checkpoint.h"
#include "parallel/threads.h"
#include "train/trainer.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("dtrain_ckpt_test_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string str() const { return path_.string(); }
  std::string file(const std::string& n) const { return (path_ / n).string(); }

 private:
  fs::path path_;
};

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void spit(const std::string& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

template <class F>
std::string corrupt_message(F&& fn) {
  try {
    fn();
  } catch (const Corrupt& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected Corrupt";
  return "";
}

TEST(Checkpoint, RoundTripAndAtomicReplace) {
  TempDir d;
  Checkpoint ck;
  std::vector<float> p = {1.5f, -2.0f, 3.25f};
  ck.put_floats("params", p);
  const uint64_t u[] = {7, 8};
  ck.put_u64s("progress", u);
  ck.put_string("note", "hello");
  ck.save(d.file("c.dtc"));
  Checkpoint back = Checkpoint::load(d.file("c.dtc"));
  EXPECT_EQ(back.get_floats("params"), p);
  EXPECT_EQ(back.get_u64s("progress"), (std::vector<uint64_t>{7, 8}));
  EXPECT_EQ(back.get_string("note"), "hello");
  EXPECT_THROW(back.get("missing"), Corrupt);
  // Saving again replaces the file and leaves no temporary behind.
  ck.put_string("note", "again");
  ck.save(d.file("c.dtc"));
  EXPECT_EQ(Checkpoint::load(d.file("c.dtc")).get_string("note"), "again");
  int files = 0;
  for (auto& e : fs::directory_iterator(d.str())) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST(Checkpoint, TruncatedCorruptAndForeignFilesAreRefused) {
  TempDir d;
  Checkpoint ck;
  ck.put_floats("params", std::vector<float>(100, 0.5f));
  ck.save(d.file("c.dtc"));
  const std::string good = slurp(d.file("c.dtc"));
  // Truncated anywhere.
  for (size_t cut : {good.size() - 1, good.size() / 2, size_t{20}, size_t{3}}) {
    spit(d.file("t.dtc"), good.substr(0, cut));
    std::string msg = corrupt_message([&] { Checkpoint::load(d.file("t.dtc")); });
    EXPECT_NE(msg.find("t.dtc"), std::string::npos) << msg;
  }
  // One flipped bit in the payload.
  std::string bad = good;
  bad[good.size() / 2] ^= 0x10;
  spit(d.file("b.dtc"), bad);
  EXPECT_NE(corrupt_message([&] { Checkpoint::load(d.file("b.dtc")); }).find("CRC"), std::string::npos);
  spit(d.file("f.dtc"), "not a checkpoint at all, just text");
  EXPECT_NE(corrupt_message([&] { Checkpoint::load(d.file("f.dtc")); }).find("magic"), std::string::npos);
  EXPECT_THROW(Checkpoint::load(d.file("absent.dtc")), IoError);
}

// ---- Trainer resume ----

data::Dataset blobs(uint64_t seed) {
  data::Rng rng(seed);
  data::Dataset ds;
  ds.source = "blobs";
  ds.rows = 300;
  ds.cols = 6;
  ds.num_classes = 3;
  ds.label_values = {0, 1, 2};
  for (int64_t i = 0; i < ds.rows; ++i) {
    const int y = static_cast<int>(rng.below(3));
    ds.labels.push_back(y);
    for (int64_t j = 0; j < ds.cols; ++j) ds.dense.push_back(static_cast<float>(rng.normal() + (j % 3 == y)));
  }
  return ds;
}

// A model with the `threads` strategy and its optimizer, as the registry builds them.
struct ThreadsRun {
  ThreadsRun(const data::Dataset& train, const data::Dataset* test, const std::string& dims, uint64_t seed, int threads)
      : model(make_mlp_model(dims, train, seed)),
        opt(make_optimizer(OptimizerConfig{.kind = "adam", .lr = 0.01f}, model->num_params())),
        strategy(*model, *opt, threads) {
    strategy.set_eval_set(test);
  }
  TrainReport run(const TrainOptions& o) { return Trainer(strategy, o).run(); }
  std::unique_ptr<TrainableModel> model;
  std::unique_ptr<Optimizer> opt;
  SyncThreads strategy;
};

TrainOptions options(const std::string& dir, int threads) {
  TrainOptions o;
  o.strategy = "threads";
  o.threads = threads;
  o.epochs = 4;
  o.batch = 32;
  o.seed = 3;
  o.checkpoint_dir = dir;
  o.out = nullptr;
  return o;
}

TEST(Trainer, ResumeContinuesExactlyAsUninterrupted) {
  TempDir a, b;
  data::Dataset train = blobs(1), test = blobs(2);
  // Uninterrupted: 4 epochs.
  ThreadsRun m1(train, &test, "6-8-3", 11, 1);
  TrainReport full = m1.run(options(a.str(), 1));
  ASSERT_EQ(full.epochs.size(), 4u);
  // Interrupted after 2 epochs, then resumed in a fresh model object (2 threads this time).
  ThreadsRun m2(train, &test, "6-8-3", 11, 2);
  TrainOptions first = options(b.str(), 2);
  first.stop_after_rounds = 2;
  TrainReport part = m2.run(first);
  ASSERT_EQ(part.epochs.size(), 2u);
  ThreadsRun m3(train, &test, "6-8-3", 999, 2);  // different init: must be overwritten
  TrainOptions second = options(b.str(), 2);
  second.resume = true;
  TrainReport rest = m3.run(second);
  EXPECT_EQ(rest.resumed_from_epoch, 2);
  ASSERT_EQ(rest.epochs.size(), 4u);
  for (size_t e = 0; e < 4; ++e) {
    EXPECT_EQ(full.epochs[e].train_loss, rest.epochs[e].train_loss) << "epoch " << e + 1;
    EXPECT_EQ(full.epochs[e].test_loss, rest.epochs[e].test_loss) << "epoch " << e + 1;
  }
  EXPECT_EQ(std::vector<float>(m1.model->params().begin(), m1.model->params().end()),
            std::vector<float>(m3.model->params().begin(), m3.model->params().end()));
  EXPECT_EQ(full.steps, rest.steps);
}

// --checkpoint-every: epochs cut into rounds of K steps train on exactly the batches of whole
// epochs (the same parameters, bit for bit), and a run stopped after any part resumes to them.
TEST(Trainer, EpochPartsTrainTheSameBatchesAndResumeMidEpoch) {
  TempDir a, b;
  data::Dataset train = blobs(1), test = blobs(2);
  ThreadsRun whole(train, &test, "6-8-3", 11, 1);
  TrainReport w = whole.run(options(a.str(), 1));
  TrainOptions parts = options(b.str(), 1);
  parts.round_steps = 3;  // 300 examples / 32 = 10 steps per epoch: 4 parts
  ThreadsRun first(train, &test, "6-8-3", 11, 1);
  parts.stop_after_rounds = 6;  // stops in the middle of epoch 2
  TrainReport p1 = first.run(parts);
  ASSERT_EQ(p1.epochs.size(), 6u);
  ThreadsRun second(train, &test, "6-8-3", 5, 1);
  parts.stop_after_rounds = -1;
  parts.resume = true;
  TrainReport p2 = second.run(parts);
  EXPECT_EQ(p2.resumed_from_epoch, 6);
  EXPECT_EQ(p2.epochs.size(), 16u);
  EXPECT_EQ(p2.steps, w.steps);
  EXPECT_EQ(std::vector<float>(whole.model->params().begin(), whole.model->params().end()),
            std::vector<float>(second.model->params().begin(), second.model->params().end()));
  EXPECT_EQ(w.test.loss, p2.test.loss);
}

TEST(Trainer, ResumeRefusesDamagedOrForeignCheckpoint) {
  TempDir d;
  data::Dataset train = blobs(1);
  ThreadsRun m(train, nullptr, "6-8-3", 1, 1);
  TrainOptions o = options(d.str(), 1);
  o.epochs = 1;
  m.run(o);
  // Another model shape: refused with both descriptions.
  ThreadsRun other(train, nullptr, "6-5-3", 1, 1);
  o.resume = true;
  o.epochs = 2;
  try {
    other.run(o);
    ADD_FAILURE() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("6-5-3"), std::string::npos) << e.what();
  }
  // Truncated file: refused as Corrupt.
  const std::string path = d.file("checkpoint.dtc");
  std::string bytes = slurp(path);
  spit(path, bytes.substr(0, bytes.size() - 7));
  EXPECT_THROW(m.run(o), Corrupt);
}

TEST(Trainer, ResumeNeedsCheckpointDir) {
  data::Dataset train = blobs(1);
  ThreadsRun m(train, nullptr, "6-8-3", 1, 1);
  TrainOptions o = options("", 1);
  o.resume = true;
  EXPECT_THROW(Trainer(m.strategy, o), InvalidArgument);
}

}  // namespace
}  // namespace dtrain
