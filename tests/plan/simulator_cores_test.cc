// The simulator and the cores' placement: what crosses cores (a peer's reads of this rank's
// gradient, a server's of a worker's), priced at the calibration's hand-off rates, and a run
// priced with the figures of the cores' verdict it saw, or a blend of both
// (plan/cluster.h with_core_distance). The rest: simulator_test.cc.
#include "plan/simulator.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "plan/sim_test_util.h"

namespace dtrain::plan {
namespace {

using testing::ideal;

TEST(Simulator, DdpAtOneRankPerCorePullsBackWhatItsPeersTouched) {
  ModelSpec m = ModelSpec::parse("mlp:784-256-10");
  const double bytes = m.params() * 4;
  Cluster c = ideal(4);  // exchange beta: the intra link's 1e-9 s/byte
  Prediction ddp = simulate(m, {.strategy = "ddp", .dp = 2, .zero = 1}, c, 64);
  Prediction local = simulate(m, {.strategy = "localsgd", .dp = 2}, c, 64);
  EXPECT_NEAR(ddp.compute_s - local.compute_s, 2 * 0.5 * bytes * 1e-9, 1e-12);  // gradient and parameters
  Prediction plain = simulate(m, {.strategy = "ddp", .dp = 2, .zero = 0}, c, 64);
  EXPECT_NEAR(plain.compute_s - local.compute_s, 0.5 * bytes * 1e-9, 1e-12);  // the gradient only
  // Calibrated hand-off rates replace the exchange's: rewriting the gradient the peer read,
  // reading the parameters it wrote (ZeRO); a host whose cores share their lines cheaply pays 0.
  c.handoff_write_s_per_byte = 3e-10;
  c.handoff_read_s_per_byte = 5e-10;
  ddp = simulate(m, {.strategy = "ddp", .dp = 2, .zero = 1}, c, 64);
  EXPECT_NEAR(ddp.compute_s - local.compute_s, 0.5 * bytes * (3e-10 + 5e-10), 1e-12);
  plain = simulate(m, {.strategy = "ddp", .dp = 2, .zero = 0}, c, 64);
  EXPECT_NEAR(plain.compute_s - local.compute_s, 0.5 * bytes * 3e-10, 1e-12);
  // Backward zeroes the gradient before it accumulates: where whole-line stores were timed,
  // the gradient pays their rate.
  c.handoff_store_s_per_byte = 1e-10;
  plain = simulate(m, {.strategy = "ddp", .dp = 2, .zero = 0}, c, 64);
  EXPECT_NEAR(plain.compute_s - local.compute_s, 0.5 * bytes * 1e-10, 1e-12);
  c.handoff_store_s_per_byte = -1;
  c.handoff_write_s_per_byte = c.handoff_read_s_per_byte = 0;
  EXPECT_NEAR(simulate(m, {.strategy = "ddp", .dp = 2, .zero = 1}, c, 64).compute_s, local.compute_s, 1e-12);
  // More ranks than cores: the caches are the co-located ranks' anyway (the slowdown curve).
  Cluster one = ideal(1);
  EXPECT_NEAR(simulate(m, {.strategy = "ddp", .dp = 2, .zero = 1}, one, 64).compute_s,
              simulate(m, {.strategy = "localsgd", .dp = 2}, one, 64).compute_s, 1e-12);
}

// A 2-rank run prices the path its context's probe chose: the calibration's 2-rank tables of
// that verdict (two_rank_by_cores) replace the mixed ones, both its collective times and where
// its all-reduce took the slots (one model-sized buffer less); a verdict it did not measure
// leaves the cluster as it was, and other rank counts are never touched.
TEST(Simulator, TwoRankRunPricesThePathItsProbeChose) {
  ModelSpec m = ModelSpec::parse("mlp:784-256-128-10");
  Cluster c = ideal(8);
  c.intra_sizes.allreduce_by_ranks[2] = {{1e3, 2e-4}, {1e9, 2e-4}};  // mixed: 200 us at every size
  c.intra_sizes.allreduce_by_ranks[4] = {{1e3, 3e-4}, {1e9, 3e-4}};
  LinkSizes::VerdictTables slots, reads;
  slots.allreduce = {{1e3, 1e-4}, {1e9, 1e-4}};
  slots.allgather = {{1e3, 5e-5}, {1e9, 5e-5}};
  slots.allreduce_slots_from = 256 << 10;
  reads.allreduce = {{1e3, 3e-4}, {1e9, 3e-4}};
  c.intra_sizes.two_rank_by_cores = {{"close", slots}, {"far", reads}};
  bool used = false;
  const Cluster close = with_core_distance(c, false, &used);
  EXPECT_TRUE(used);
  EXPECT_NEAR(close.measured_allreduce_s(2, 1e6), 1e-4, 1e-12);
  EXPECT_NEAR(close.measured_allgather_s(2, 1e6), 5e-5, 1e-12);
  EXPECT_NEAR(close.measured_allreduce_s(4, 1e6), 3e-4, 1e-12);  // other rank counts as they were
  // (The epoch's order and, timed beside the slots, the reads' piece: as the far run's reads.)
  EXPECT_NEAR(simulate(m, {.strategy = "localsgd", .dp = 2}, close, 64).buffers_b, testing::kOrder + 256.0 * 1024, 1e-6);
  const Cluster far = with_core_distance(c, true, &used);
  EXPECT_TRUE(used);
  EXPECT_NEAR(far.measured_allreduce_s(2, 1e6), 3e-4, 1e-12);
  EXPECT_DOUBLE_EQ(far.measured_allgather_s(2, 1e6), -1);  // the far verdict timed no all-gather
  EXPECT_NEAR(simulate(m, {.strategy = "localsgd", .dp = 2}, far, 64).buffers_b, testing::kOrder + 256.0 * 1024, 1e-6);
  const double ddp_close = simulate(m, {.strategy = "ddp", .dp = 2}, close, 64).comm_s;
  const double ddp_far = simulate(m, {.strategy = "ddp", .dp = 2}, far, 64).comm_s;
  EXPECT_GT(ddp_far, ddp_close);
  // A verdict that covered only some sizes (its rows' calls ran mostly under the other):
  // its points within its span, the mixed ones beyond.
  LinkSizes::VerdictTables partial;
  partial.reducescatter = {{16e6, 1.6e-3}, {32e6, 3.2e-3}};
  Cluster p = c;
  p.intra_sizes.reducescatter_by_ranks[2] = {{1e6, 7e-5}, {4e6, 2.5e-4}, {16e6, 1.4e-3}, {64e6, 9e-3}};
  p.intra_sizes.two_rank_by_cores = {{"close", partial}};
  const Cluster part = with_core_distance(p, false, &used);
  EXPECT_TRUE(used);
  const auto& rs = part.intra_sizes.reducescatter_by_ranks.at(2);
  const std::vector<std::pair<double, double>> want = {{1e6, 7e-5}, {4e6, 2.5e-4}, {16e6, 1.6e-3}, {32e6, 3.2e-3}, {64e6, 9e-3}};
  EXPECT_EQ(rs, want);
  // A size the verdict lacks within its span takes the mixed point at the verdict's level:
  // far held the broadcast at 1 MB (2x the mixed) and 256 MB (1x) only; the mixed 4 MB and
  // 16 MB points sit 1/4 and 1/2 of the way between them in log size. A straight line
  // through the verdict's two points would have put 4 MB at 4x its mixed time.
  LinkSizes::VerdictTables sparse;
  sparse.broadcast = {{1e6, 2e-4}, {256e6, 2e-2}};
  Cluster q = c;
  q.intra_sizes.broadcast_by_ranks[2] = {{1e6, 1e-4}, {4e6, 1e-4}, {16e6, 1e-3}, {256e6, 2e-2}, {512e6, 4e-2}};
  q.intra_sizes.two_rank_by_cores = {{"far", sparse}};
  const Cluster far_sparse = with_core_distance(q, true);
  const auto& bc = far_sparse.intra_sizes.broadcast_by_ranks.at(2);
  ASSERT_EQ(bc.size(), 5u);
  EXPECT_DOUBLE_EQ(bc[0].second, 2e-4);
  EXPECT_NEAR(bc[1].second, 1e-4 * 1.75, 1e-12);
  EXPECT_NEAR(bc[2].second, 1e-3 * 1.5, 1e-12);
  EXPECT_DOUBLE_EQ(bc[3].second, 2e-2);
  EXPECT_DOUBLE_EQ(bc[4].second, 4e-2);  // beyond the span: the mixed point as it is
  EXPECT_EQ(verdict_points_over_mixed(sparse.broadcast, {}), sparse.broadcast);
  // A verdict the calibration never saw: unchanged.
  c.intra_sizes.two_rank_by_cores.erase("far");
  EXPECT_NEAR(with_core_distance(c, true, &used).measured_allreduce_s(2, 1e6), 2e-4, 1e-12);
  EXPECT_FALSE(used);
  // Through the file and back; a verdict other than close or far is refused.
  nlohmann::json j = link_sizes_json(c.intra_sizes);
  const LinkSizes back = link_sizes_from_json(j, "t");
  ASSERT_EQ(back.two_rank_by_cores.count("close"), 1u);
  EXPECT_DOUBLE_EQ(back.two_rank_by_cores.at("close").allreduce_slots_from, 256 << 10);
  EXPECT_EQ(back.two_rank_by_cores.at("close").allgather.size(), 2u);
  j["two_rank_by_cores"]["near"] = j["two_rank_by_cores"]["close"];
  EXPECT_THROW(link_sizes_from_json(j, "t"), InvalidArgument);
}

// More ranks than cores: a run whose cores probed close or far (the launcher's probe) takes
// the calibration's tables and gap factor of that verdict for its rank count, where the
// calibration filed passes under it (by_cores_by_ranks); the 2-rank tables stay as they were.
TEST(Simulator, OversubscribedRunPricesItsCoresVerdict) {
  ModelSpec m = ModelSpec::parse("mlp:784-256-128-10");
  Cluster c = ideal(2);
  c.intra_sizes.allreduce_by_ranks[2] = {{1e3, 2e-4}, {1e9, 2e-4}};
  c.intra_sizes.allreduce_by_ranks[4] = {{1e3, 5e-4}, {1e9, 5e-4}};  // mixed: 500 us
  c.intra_sizes.gap_factor_by_ranks[4] = 3.9;                         // a far gap pass over a close call
  LinkSizes::VerdictTables close, far;
  close.allreduce = {{1e6, 2.5e-4}};
  close.gap_factor = 1.2;
  far.allreduce = {{1e6, 8.5e-4}};
  c.intra_sizes.by_cores_by_ranks[4] = {{"close", close}, {"far", far}};
  bool used = false;
  const Cluster near = with_core_distance(c, false, &used);
  EXPECT_TRUE(used);
  EXPECT_NEAR(near.measured_allreduce_s(4, 1e6), 2.5e-4, 1e-12);
  EXPECT_NEAR(near.measured_allreduce_s(4, 1e9), 5e-4, 1e-12);  // the mixed point beyond its span
  EXPECT_DOUBLE_EQ(near.intra_sizes.gap_factor_by_ranks.at(4), 1.2);
  EXPECT_NEAR(near.measured_allreduce_s(2, 1e6), 2e-4, 1e-12);
  const Cluster apart = with_core_distance(c, true, &used);
  EXPECT_TRUE(used);
  EXPECT_NEAR(apart.measured_allreduce_s(4, 1e6), 8.5e-4, 1e-12);
  EXPECT_EQ(apart.intra_sizes.gap_factor_by_ranks.count(4), 0u);  // none timed far: none (not the mixed one)
  EXPECT_DOUBLE_EQ(c.intra_sizes.gap_factor_by_ranks.at(4), 3.9);  // the mixed tables keep theirs
  const Layout l{.strategy = "ddp", .dp = 4};
  EXPECT_LT(simulate(m, l, near, 64).step_s, simulate(m, l, c, 64).step_s);
  EXPECT_GT(simulate(m, l, apart, 64).step_s, simulate(m, l, near, 64).step_s);
  // Through the file and back; a rank count below 3 or a gap factor below 1 is refused.
  nlohmann::json j = link_sizes_json(c.intra_sizes);
  const LinkSizes back = link_sizes_from_json(j, "t");
  ASSERT_EQ(back.by_cores_by_ranks.count(4), 1u);
  EXPECT_DOUBLE_EQ(back.by_cores_by_ranks.at(4).at("close").gap_factor, 1.2);
  EXPECT_EQ(back.by_cores_by_ranks.at(4).at("far").allreduce, far.allreduce);
  nlohmann::json bad = j;
  bad["by_cores_by_ranks"]["2"] = bad["by_cores_by_ranks"]["4"];
  EXPECT_THROW(link_sizes_from_json(bad, "t"), InvalidArgument);
  bad = j;
  bad["by_cores_by_ranks"]["4"]["close"]["gap_factor"] = 0.5;
  EXPECT_THROW(link_sizes_from_json(bad, "t"), InvalidArgument);
}

TEST(Simulator, SyncPsThroughTheWindowPaysTheHandOff) {
  ModelSpec m = ModelSpec::parse("mlp:784-256-128-10");
  const double bytes = static_cast<double>(m.params()) * 4;
  Cluster c = ideal(2);
  Layout ps{.strategy = "ps", .dp = 2};
  ps.servers = 1;
  ps.ps_sync = true;
  const Prediction none = simulate(m, ps, c, 64);  // no hand-off measured: nothing added
  c.handoff_write_s_per_byte = 0;
  const Prediction zero = simulate(m, ps, c, 64);
  EXPECT_DOUBLE_EQ(zero.step_s, none.step_s);
  c.handoff_write_s_per_byte = 0.3e-9;  // the far placement's rate
  const Prediction far = simulate(m, ps, c, 64);
  // The worker's gradient slot and the server's slice, each rewritten once after the other read it.
  EXPECT_NEAR(far.compute_s - zero.compute_s, bytes * 0.3e-9, 1e-12);
  EXPECT_NEAR(far.optimizer_s - zero.optimizer_s, bytes * 0.3e-9, 1e-12);
  // More ranks than cores: a hand-off is paid where the rank that read the lines ran on the
  // other core, on the step's path: the worker's slot was summed by the server (on the other
  // of two cores half the time), rewritten while the 3 workers share the cores (their passes'
  // slowdown); the server's slice was pulled by all 3 workers, not all on its own core but
  // one time in 2^3.
  Layout four = ps;
  four.dp = 4;
  c.handoff_write_s_per_byte = 0;
  const Prediction at4 = simulate(m, four, c, 64);
  c.handoff_write_s_per_byte = 0.3e-9;
  const Prediction far4 = simulate(m, four, c, 64);
  const double slow = c.compute_slowdown(c.busiest_core_ranks(3));
  EXPECT_GT(slow, 1);
  EXPECT_NEAR(far4.compute_s - at4.compute_s, 0.5 * slow * bytes * 0.3e-9, 1e-12);
  EXPECT_NEAR(far4.optimizer_s - at4.optimizer_s, (1 - 0.125) * bytes * 0.3e-9, 1e-12);
  EXPECT_GE(far4.step_s, far4.compute_s + far4.optimizer_s);
  // And the node's floor still counts them as CPU work: with a rate large enough for the floor
  // to set the step, the step grows by more than the path's share.
  const double rate = 1e-7;
  c.handoff_write_s_per_byte = rate;
  const Prediction big = simulate(m, four, c, 64);
  EXPECT_GE(big.step_s - at4.step_s, 0.5 * slow * bytes * rate + (1 - 0.125) * bytes * rate - 1e-12);
  // Both sides overwrite whole lines (the worker zeroes its slot, the server copies its slice
  // in): where the calibration timed such stores, their rate, not the rewrite's.
  c.handoff_write_s_per_byte = 0.3e-9;
  c.handoff_store_s_per_byte = 0.02e-9;
  const Prediction stores = simulate(m, ps, c, 64);
  EXPECT_NEAR(stores.compute_s - zero.compute_s, bytes * 0.02e-9, 1e-12);
  EXPECT_NEAR(stores.optimizer_s - zero.optimizer_s, bytes * 0.02e-9, 1e-12);
}

// ddp with a core per rank: backward rewrites the lines its peers read in the all-reduce. A
// timed window all-reduce has that rewrite in it already (back to back in place, each call
// writes the lines the peers read in the one before), so the hand-off is charged only where
// the all-reduce is priced otherwise.
TEST(Simulator, DdpPaysTheHandOffOnlyWhereNoTimedWindowAllReduceHoldsIt) {
  ModelSpec m = ModelSpec::parse("mlp:784-256-128-10");
  const double bytes = static_cast<double>(m.params()) * 4;
  Cluster c = ideal(2);
  const Layout ddp{.strategy = "ddp", .dp = 2};
  c.handoff_write_s_per_byte = 0;
  const double none = simulate(m, ddp, c, 64).compute_s;
  c.handoff_write_s_per_byte = 0.3e-9;
  EXPECT_NEAR(simulate(m, ddp, c, 64).compute_s - none, bytes / 2 * 0.3e-9, 1e-12);  // half the gradient, read by the peer
  c.intra_sizes.allreduce_window_by_ranks[2] = {{1e3, 1e-5}, {1e9, 1e-2}};
  c.handoff_write_s_per_byte = 0;
  const double timed = simulate(m, ddp, c, 64).compute_s;
  c.handoff_write_s_per_byte = 0.3e-9;
  EXPECT_DOUBLE_EQ(simulate(m, ddp, c, 64).compute_s, timed);
}

// A run whose two ranks' verdict changed mid-run is priced in proportion: blend_times weighs
// each time by its verdict's share of the calls, keeps the majority's memory and traffic, and
// clamps the weight (a share is a fraction).
TEST(Simulator, ARunUnderTwoVerdictsBlendsTheirTimes) {
  Prediction close, far;
  close.step_s = 1.0, close.comm_s = 0.2, close.compute_s = 0.7, close.optimizer_s = 0.1;
  close.weights_b = 100, close.dp_bytes = 40;
  far.step_s = 2.0, far.comm_s = 1.2, far.compute_s = 0.7, far.optimizer_s = 0.1;
  far.weights_b = 999, far.dp_bytes = 999;
  const Prediction p = blend_times(close, far, 0.25);
  EXPECT_DOUBLE_EQ(p.step_s, 1.25);
  EXPECT_DOUBLE_EQ(p.comm_s, 0.45);
  EXPECT_DOUBLE_EQ(p.compute_s, 0.7);
  EXPECT_DOUBLE_EQ(p.optimizer_s, 0.1);
  EXPECT_DOUBLE_EQ(p.weights_b, 100);
  EXPECT_DOUBLE_EQ(p.dp_bytes, 40);
  EXPECT_DOUBLE_EQ(blend_times(close, far, 0).step_s, 1.0);
  EXPECT_DOUBLE_EQ(blend_times(close, far, 1).step_s, 2.0);
  EXPECT_DOUBLE_EQ(blend_times(close, far, 7).step_s, 2.0);
  EXPECT_DOUBLE_EQ(blend_times(close, far, -1).step_s, 1.0);
}

}  // namespace
}  // namespace dtrain::plan
