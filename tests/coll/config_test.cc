// The collectives' configuration: read from a settings snapshot, carried by the communicator
// (and its splits), honoured by the algorithm choice; Work::wait's default timeout is the
// communicator's.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/settings.h"
#include "coll/collectives.h"
#include "coll/config.h"
#include "coll/cost_model.h"
#include "coll/shm_context.h"
#include "coll/work.h"
#include "support/world.h"

namespace dtrain {
namespace {

using testing::run_world;
using testing::WorldOptions;

TEST(CollConfig, DefaultsAreAnUnsetEnvironment) {
  CollConfig fresh;
  CollConfig from = coll_config_from(Settings::from_map({}));
  EXPECT_EQ(from.segment_bytes, fresh.segment_bytes);
  EXPECT_EQ(from.check, fresh.check);
  EXPECT_EQ(from.shm_context, fresh.shm_context);
  EXPECT_EQ(from.shm_yield_us, fresh.shm_yield_us);
  EXPECT_EQ(from.shm_slot_bytes, fresh.shm_slot_bytes);
  EXPECT_EQ(from.shm_slots_bytes, fresh.shm_slots_bytes);
  EXPECT_EQ(from.shm_reprobe_ms, fresh.shm_reprobe_ms);
  for (size_t i = 0; i < from.forced.size(); ++i) EXPECT_EQ(from.forced[i].name, "");
}

TEST(CollConfig, ReadsEveryCollectivesSetting) {
  auto s = Settings::from_map({{"DTRAIN_SEGMENT_BYTES", "64K"},
                               {"DTRAIN_COLL_CHECK", "0"},
                               {"DTRAIN_SHM_CONTEXT", "0"},
                               {"DTRAIN_SHM_YIELD_US", "7"},
                               {"DTRAIN_SHM_SLOT_BYTES", "16K"},
                               {"DTRAIN_SHM_SLOTS_BYTES", "0"},
                               {"DTRAIN_SHM_REPROBE_MS", "0"},
                               {"DTRAIN_CALIBRATION", "/nowhere/cal.json"},
                               {"DTRAIN_HOST_ID", "node-a"},
                               {"DTRAIN_ALGO", "ring"},
                               {"DTRAIN_BROADCAST_ALGO", "tree"}});
  CollConfig c = coll_config_from(s);
  EXPECT_EQ(c.segment_bytes, 64u << 10);
  EXPECT_FALSE(c.check);
  EXPECT_FALSE(c.shm_context);  // on by default; 0 turns the shared-memory paths off
  EXPECT_EQ(c.shm_yield_us, 7);
  EXPECT_EQ(c.shm_slot_bytes, 16u << 10);
  EXPECT_EQ(c.shm_slots_bytes, 0u);
  EXPECT_EQ(c.shm_reprobe_ms, 0);  // probe once, when the communicator starts
  EXPECT_EQ(c.calibration_path, "/nowhere/cal.json");
  EXPECT_EQ(c.host_id, "node-a");
  EXPECT_EQ(c.forced_algorithm(CollOp::kBroadcast).name, "tree");
  EXPECT_FALSE(c.forced_algorithm(CollOp::kBroadcast).job_wide);
  EXPECT_EQ(c.forced_algorithm(CollOp::kAllreduce).name, "ring");
  EXPECT_TRUE(c.forced_algorithm(CollOp::kAllreduce).job_wide);
}

// DTRAIN_ALLGATHER_ALGO=auto once counted as forcing an algorithm, which turned off auto's
// preference for the shared-memory phase: a 16 KiB all-gather at 2 ranks went to the ring.
TEST(CollConfig, AutoForcesNothingAndAPerOperationAutoLiftsTheJobWideChoice) {
  CollConfig c = coll_config_from(Settings::from_map({{"DTRAIN_ALGO", "ring"}, {"DTRAIN_ALLGATHER_ALGO", "auto"}}));
  EXPECT_EQ(c.forced_algorithm(CollOp::kAllgather).name, "");
  EXPECT_FALSE(config_forces_algorithm(c, CollOp::kAllgather));
  EXPECT_EQ(c.forced_algorithm(CollOp::kAllreduce).name, "ring");
  CollConfig all_auto = coll_config_from(Settings::from_map({{"DTRAIN_ALGO", "auto"}}));
  for (size_t i = 0; i < all_auto.forced.size(); ++i) EXPECT_EQ(all_auto.forced[i].name, "");
}

TEST(CollConfig, EveryPerOperationVariableIsRegistered) {
  for (int i = 0; i <= static_cast<int>(CollOp::kBarrier); ++i) {
    const std::string var = algorithm_setting_name(static_cast<CollOp>(i));
    EXPECT_NE(find_setting(var), nullptr) << var << " is read but not in base/settings.cc";
  }
  EXPECT_EQ(algorithm_setting_name(CollOp::kReduceScatter), "DTRAIN_REDUCESCATTER_ALGO");
}

// The InvalidArgument a setting's value raises in coll_config_from ("no error" if none).
std::string config_error(const std::string& name, const std::string& value) {
  try {
    coll_config_from(Settings::from_map({{name, value}}));
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "no error";
}

TEST(CollConfig, AMalformedSegmentSizeNamesTheVariable) {
  const std::string what = config_error("DTRAIN_SEGMENT_BYTES", "lots");
  EXPECT_NE(what.find("DTRAIN_SEGMENT_BYTES"), std::string::npos) << what;
}

TEST(CollConfig, ANegativeReprobeIntervalSaysWhatIsAllowed) {
  const std::string what = config_error("DTRAIN_SHM_REPROBE_MS", "-5");
  EXPECT_NE(what.find("DTRAIN_SHM_REPROBE_MS=-5: must be 0"), std::string::npos) << what;
}

TEST(CollConfig, TheCommunicatorsForcedAlgorithmWinsOverTheCostModelAndReachesSplits) {
  WorldOptions o;
  o.coll.forced[static_cast<size_t>(CollOp::kAllreduce)] = ForcedAlgorithm{"ring", false};
  o.coll.segment_bytes = 256;
  run_world(3, o, [](Communicator& c) {
    std::vector<float> x(1000, 1.0f);
    EXPECT_EQ(allreduce(c, x.data(), x.size(), DType::kFloat32, ReduceOp::kSum), Algorithm::kRing);
    EXPECT_EQ(x[999], 3.0f);
    auto sub = c.split(0, c.rank());
    EXPECT_EQ(sub->coll_config().segment_bytes, 256u);
    EXPECT_EQ(resolve_algorithm(CollOp::kAllreduce, Algorithm::kAuto, *sub, 4000, {}), Algorithm::kRing);
    // A per-call algorithm still wins over the configuration.
    AllreduceOptions tree;
    tree.algorithm = Algorithm::kTree;
    EXPECT_EQ(allreduce(*sub, x.data(), x.size(), DType::kFloat32, ReduceOp::kSum, tree), Algorithm::kTree);
  });
}

// The communicator builds its shared-memory context with the configured slot size.
TEST(CollConfig, TheContextsSlotSizeComesFromTheConfig) {
  WorldOptions o;
  o.coll.shm_slot_bytes = 4096;
  run_world(2, o, [](Communicator& c) {
    ASSERT_NE(c.shm_context(), nullptr);
    EXPECT_EQ(c.shm_context()->slot_bytes(), 4096u);
    std::vector<float> x(3000, 1.0f);  // 12 KB: three slots' worth through the slot paths
    broadcast(c, x.data(), x.size(), DType::kFloat32, 1, BroadcastOptions{});
    EXPECT_EQ(x[2999], 1.0f);
  });
}

TEST(WorkWait, DefaultsToTheCommunicatorsTimeout) {
  WorldOptions o;
  o.timeout_s = 0.2;
  run_world(1, o, [](Communicator& c) {
    std::promise<void> release;
    std::shared_future<void> gate = release.get_future().share();
    ProgressQueue q(c);
    Work w = q.submit("blocked", [gate](Communicator&) { gate.wait(); });
    try {
      w.wait();  // no timeout given: the communicator's 0.2 s, not forever
      ADD_FAILURE() << "wait() returned while the work was blocked";
    } catch (const Timeout& e) {
      EXPECT_NE(std::string(e.what()).find("blocked"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(w.done());
    release.set_value();
    w.wait(kForever);
    EXPECT_TRUE(w.done());
  });
}

}  // namespace
}  // namespace dtrain
