// The simulator: model shapes, the data-parallel strategies' walk over buckets, memory and its
// errors (the model-parallel layouts: simulator_model_parallel_test.cc; what crosses cores and
// the cores' verdicts: simulator_cores_test.cc; compute from the calibration's unit lines:
// simulator_units_test.cc).
#include "plan/simulator.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "nn/transformer.h"
#include "parallel/data_parallel.h"
#include "parallel/pipeline_schedule.h"
#include "plan/closed_forms.h"
#include "plan/sim_costs.h"
#include "plan/sim_test_util.h"

namespace dtrain::plan {
namespace {

using testing::ideal;
using testing::kGpt;

TEST(Simulator, ModelShapesMatchTheExecutorsModels) {
  ModelSpec mlp = ModelSpec::parse("mlp:784-256-128-10");
  EXPECT_DOUBLE_EQ(mlp.params(), 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
  ASSERT_EQ(mlp.units.size(), 3u);
  ModelSpec gpt = ModelSpec::parse(kGpt);
  EXPECT_DOUBLE_EQ(gpt.params(), static_cast<double>(gpt_num_params(GptConfig::parse(kGpt, 65))));
  EXPECT_EQ(gpt.units.size(), 6u);  // embedding, 4 blocks, head
  EXPECT_THROW(ModelSpec::parse("mlp:784-x-10"), InvalidArgument);
  EXPECT_THROW(ModelSpec::parse("resnet50"), InvalidArgument);
}

TEST(Simulator, SingleRankIsComputePlusOptimizer) {
  ModelSpec m = ModelSpec::parse("mlp:100-10");
  Cluster c = ideal();
  Prediction p = simulate(m, {.strategy = "single"}, c, 50);
  // forward 2*100*10 FLOPs per item, backward twice that: 3 * 2000 * 50 / 1e9.
  EXPECT_NEAR(p.compute_s, 3 * 2000.0 * 50 / 1e9, 1e-12);
  EXPECT_DOUBLE_EQ(p.comm_s, 0);
  EXPECT_DOUBLE_EQ(p.weights_b, 1010 * 4.0);
  // Its one gradient and nothing more: SyncThreads steps its one shard's gradient in place
  // (no summed copy), and the model keeps no gradient buffer of its own (both 2026-11-27).
  EXPECT_DOUBLE_EQ(p.grads_b, 1010 * 4.0);
  EXPECT_DOUBLE_EQ(p.buffers_b, testing::kOrder);  // the epoch's order of the rows
  // ... of the training set the run reads.
  Layout l{.strategy = "single"};
  l.train_rows = 1000;
  EXPECT_DOUBLE_EQ(simulate(m, l, c, 50).buffers_b, 8.0 * 1000);
}

TEST(Simulator, DdpBucketsOverlapWithBackward) {
  ModelSpec m = ModelSpec::parse("mlp:784-1024-1024-1024-10");
  Cluster c = ideal();
  Layout one{.strategy = "ddp", .dp = 4, .bucket_mb = 1024};   // one bucket: nothing overlaps
  Layout many{.strategy = "ddp", .dp = 4, .bucket_mb = 0.5};  // a bucket per layer or so
  Prediction a = simulate(m, one, c, 256), b = simulate(m, many, c, 256);
  // One bucket: the whole all-reduce is exposed.
  EXPECT_NEAR(a.comm_s, best_allreduce_s(4, m.params() * 4, c.intra), 1e-12);
  EXPECT_LT(b.comm_s, a.comm_s);
  EXPECT_DOUBLE_EQ(a.compute_s, b.compute_s);
  EXPECT_DOUBLE_EQ(a.dp_bytes, 2 * m.params() * 4 * 3 / 4);
}

TEST(Simulator, TransfersAreCostedAtTheirOwnSize) {
  Cluster c = ideal();
  c.intra.gamma_s_per_byte = 1e-10;
  // Two measured all-reduce points at p = 2 that imply beta 0.25 ns/B at 1 MiB and 1 ns/B at
  // 16 MiB (ring at p = 2: T = 2 alpha + n beta + n/2 gamma), and exchanges at 0.5 / 2 ns/B.
  const double a = c.intra.alpha_s, g = c.intra.gamma_s_per_byte, s1 = 1 << 20, s16 = 16 << 20;
  c.intra_sizes.allreduce = {{s1, 2 * a + s1 * 0.25e-9 + s1 / 2 * g}, {s16, 2 * a + s16 * 1e-9 + s16 / 2 * g}};
  c.intra_sizes.exchange = {{s1, a + s1 * 0.5e-9}, {s16, a + s16 * 2e-9}};
  EXPECT_NEAR(c.link_at(false, s1, false).beta_s_per_byte, 0.25e-9, 1e-18);
  EXPECT_NEAR(c.link_at(false, s16, false).beta_s_per_byte, 1e-9, 1e-18);
  EXPECT_NEAR(c.link_at(false, 4.0 * (1 << 20), false).beta_s_per_byte, 0.625e-9, 1e-18);  // halfway in log(bytes)
  EXPECT_NEAR(c.link_at(false, 1024, false).beta_s_per_byte, 0.25e-9, 1e-18);              // flat below the first
  EXPECT_NEAR(c.link_at(false, 1e9, true).beta_s_per_byte, 2e-9, 1e-18);                   // and above the last
  EXPECT_NEAR(c.link_at(false, s1, true).beta_s_per_byte, 0.5e-9, 1e-18);
  EXPECT_DOUBLE_EQ(c.link_at(true, s1, false).beta_s_per_byte, c.inter.beta_s_per_byte);  // no inter table
  // An all-reduce at the measured rank count takes the measured time: log-log between
  // points, the first point's time below it, linear in bytes beyond the last.
  EXPECT_NEAR(c.measured_allreduce_s(2, s1), c.intra_sizes.allreduce[0].second, 1e-15);
  const double t1 = c.intra_sizes.allreduce[0].second, t16 = c.intra_sizes.allreduce[1].second;
  EXPECT_NEAR(c.measured_allreduce_s(2, 4.0 * (1 << 20)), std::sqrt(t1 * t16), 1e-12);
  EXPECT_NEAR(c.measured_allreduce_s(2, 2.0 * s16), 2 * t16, 1e-12);
  EXPECT_EQ(c.measured_allreduce_s(4, s1), -1);
  c.intra_sizes.allreduce_by_ranks[4] = {{s1, 1e-3}};
  EXPECT_NEAR(c.measured_allreduce_s(4, s1 / 2), 1e-3, 1e-15);
  // The MLP's one ~0.94 MB bucket: the measured 2-rank time (below the first point: its time).
  ModelSpec m = ModelSpec::parse("mlp:784-256-128-10");
  Prediction p = simulate(m, {.strategy = "ddp", .dp = 2, .bucket_mb = 16}, c, 64);
  EXPECT_NEAR(p.comm_s, t1, 1e-12);
  // 4 ranks: the 4-rank figure; 3 ranks (not measured): the formula at the sized beta.
  EXPECT_NEAR(simulate(m, {.strategy = "ddp", .dp = 4, .bucket_mb = 16}, c, 64).comm_s, 1e-3, 1e-12);
  const double bytes = m.params() * 4;
  EXPECT_NEAR(simulate(m, {.strategy = "ddp", .dp = 3, .bucket_mb = 16}, c, 63).comm_s,
              best_allreduce_s(3, bytes, c.link_at(false, bytes, false)), 1e-12);
}

// ZeRO's sync takes the reduce-scatter and all-gather measured at its rank count when the
// calibration has them (their shared-memory paths are not an all-reduce's halves), and the
// ring formulas on the link otherwise; the cluster file carries them.
TEST(Simulator, ZeroSyncTakesTheMeasuredReduceScatterAndAllGather) {
  Cluster c = ideal();
  ModelSpec g = ModelSpec::parse(kGpt);
  Layout z{.strategy = "zero", .dp = 2, .zero = 1};
  const double bytes = simulate(g, z, c, 8).dp_bytes;  // traffic; the sync moves the stage's gradient
  ASSERT_GT(bytes, 0);
  const double before = simulate(g, z, c, 8).comm_s;
  c.intra_sizes.reducescatter_by_ranks[2] = {{1e3, 2e-4}, {1e9, 2e-4}};
  c.intra_sizes.allgather_by_ranks[2] = {{1e3, 3e-4}, {1e9, 3e-4}};
  EXPECT_NEAR(c.measured_reducescatter_s(2, 1e6), 2e-4, 1e-15);
  EXPECT_EQ(c.measured_allgather_s(4, 1e6), -1);
  c.intra_sizes.allreduce_by_ranks[2] = {{1, 1e-5}, {1e9, 1e-5}};
  // One bucket: one of each, and the clipping norm's 8-byte all-reduce.
  EXPECT_NEAR(simulate(g, z, c, 8).comm_s, 5e-4 + 1e-5, 1e-12);
  EXPECT_NE(before, 5e-4);
  // The MLP's ddp with ZeRO-2: its step is fused into the bucket's all-reduce (zero.h), so the
  // one bucket costs plain ddp's all-reduce plus this rank's half of the optimizer step, and
  // no step is left after it.
  ModelSpec m = ModelSpec::parse("mlp:784-256-128-10");
  Prediction p = simulate(m, {.strategy = "ddp", .dp = 2, .zero = 2, .bucket_mb = 16}, c, 64);
  Prediction plain = simulate(m, {.strategy = "ddp", .dp = 2, .zero = 0, .bucket_mb = 16}, c, 64);
  ASSERT_GT(plain.optimizer_s, 0);
  EXPECT_NEAR(p.comm_s, plain.comm_s + plain.optimizer_s / 2, 1e-12);
  EXPECT_EQ(p.optimizer_s, 0);
  EXPECT_EQ(p.optimizer_b, plain.optimizer_b);  // stage 0's memory terms (simulator.cc says why)
  c.intra_sizes.broadcast_by_ranks[8] = {{1e3, 1e-5}, {1e6, 1e-4}};
  Cluster back = cluster_from_json(cluster_to_json(c), "roundtrip");
  EXPECT_NEAR(back.measured_allgather_s(2, 1e6), 3e-4, 1e-15);
  EXPECT_NEAR(back.measured_broadcast_s(8, 1e6), 1e-4, 1e-15);
  EXPECT_EQ(back.measured_broadcast_s(4, 1e6), -1);
}

TEST(Simulator, OversubscribedRanksShareTheCores) {
  ModelSpec m = ModelSpec::parse("mlp:784-256-10");
  Cluster c = ideal(2);
  c.oversub_penalty = 1.0;
  Prediction two = simulate(m, {.strategy = "localsgd", .dp = 2}, c, 64);
  Prediction four = simulate(m, {.strategy = "localsgd", .dp = 4}, c, 64);
  // Half the items per rank, but each rank gets half a core: the same compute time.
  EXPECT_NEAR(four.compute_s, two.compute_s, 1e-12);
}

TEST(Simulator, OnlyRanksComputingAtOnceShareTheCores) {
  ModelSpec m = ModelSpec::parse(kGpt);
  Cluster fast = ideal(64), one = ideal(1);
  one.slowdown = {{1, 1.0}, {2, 2.0}};  // two computing ranks on one core: each at half speed
  // One micro-batch through two stages: never more than one stage computes, so nothing slows.
  Layout seq{.strategy = "pp", .pp = 2, .micro = 1, .schedule = "gpipe"};
  EXPECT_NEAR(simulate(m, seq, one, 8).step_s, simulate(m, seq, fast, 8).step_s, 1e-12);
  // ZeRO data parallelism: both ranks compute all the time, twice as long on one core.
  Layout dp{.strategy = "zero", .dp = 2, .zero = 1};
  EXPECT_NEAR(simulate(m, dp, one, 8).compute_s, 2 * simulate(m, dp, fast, 8).compute_s, 1e-12);
  // Many micro-batches keep both stages busy most of the step: close to the full slowdown.
  Layout full{.strategy = "pp", .pp = 2, .micro = 16, .schedule = "1f1b"};
  const double r = simulate(m, full, one, 64).compute_s / simulate(m, full, fast, 64).compute_s;
  EXPECT_GT(r, 1.6);
  EXPECT_LT(r, 2.0);
  // A parameter server's idle server does not slow its one worker.
  ModelSpec mlp = ModelSpec::parse("mlp:784-256-10");
  Layout ps{.strategy = "ps", .dp = 2};
  EXPECT_NEAR(simulate(mlp, ps, one, 64).compute_s, simulate(mlp, ps, fast, 64).compute_s, 1e-12);
}

// Ranks that meet every step and outnumber the cores run to their next wait one after another:
// the step waits for the busiest core's ceil(r / c) ranks, not r / c of a core each.
TEST(Simulator, RanksInLockstepWaitForTheBusiestCore) {
  ModelSpec m = ModelSpec::parse("mlp:784-256-10");
  Cluster c = ideal(2);
  c.slowdown = {{1, 1.0}, {2, 1.0}, {4, 2.0}};  // 3 ranks on 2 cores: 1.5 at an even share
  EXPECT_EQ(c.busiest_core_ranks(3), 4);
  EXPECT_EQ(c.busiest_core_ranks(4), 4);
  EXPECT_EQ(c.busiest_core_ranks(2), 2);
  auto compute_per_item = [&](const Layout& l, int workers) {
    return simulate(m, l, c, 96).compute_s / (96.0 / workers);
  };
  const double alone = simulate(m, {.strategy = "ddp", .dp = 1}, ideal(2), 96).compute_s / 96;
  // A synchronous server's three workers, and ddp's three ranks: two on one core.
  EXPECT_NEAR(compute_per_item({.strategy = "ps", .dp = 4, .ps_sync = true}, 3), 2.0 * alone, 1e-9 * alone);
  EXPECT_NEAR(compute_per_item({.strategy = "ddp", .dp = 3}, 3), 2.0 * alone, 1e-9 * alone);
  // An asynchronous server's workers and Local SGD's ranks between averages share evenly.
  EXPECT_NEAR(compute_per_item({.strategy = "ps", .dp = 4}, 3), 1.5 * alone, 1e-9 * alone);
  EXPECT_NEAR(compute_per_item({.strategy = "localsgd", .dp = 3}, 3), 1.5 * alone, 1e-9 * alone);
}

// gossip's mix in bytes read and written: deg + 1 models read and one written, which through
// the window (the other slot) is first allocated: deg + 3 models; in place (across hosts) deg + 2.
// On a complete graph through the window (the ring at 2 ranks) each rank makes 1/workers of it.
TEST(Simulator, GossipMixCountsItsWritesAndTheirAllocation) {
  ModelSpec mlp = ModelSpec::parse("mlp:784-256-10");
  const double bytes = mlp.params() * 4;
  auto comm = [&](Cluster c, int n, double bps) {
    c.elementwise_bps = bps;
    return simulate(mlp, {.strategy = "gossip", .dp = n}, c, 64).comm_s;
  };
  const Cluster one = ideal(8);
  EXPECT_NEAR(comm(one, 4, 1e9) - comm(one, 4, 2e9), (2 + 3) * bytes / 2e9, 1e-12);
  EXPECT_NEAR(comm(one, 2, 1e9) - comm(one, 2, 2e9), (1 + 3) * bytes / 2e9 / 2, 1e-12);
  Cluster hosts = ideal(8);
  hosts.nodes = 2, hosts.ranks_per_node = 2;
  EXPECT_NEAR(comm(hosts, 4, 1e9) - comm(hosts, 4, 2e9), (2 + 2) * bytes / 2e9, 1e-12);
  Cluster pair = ideal(8);  // 2 ranks across 2 hosts: messages, the whole mix on each
  pair.nodes = 2, pair.ranks_per_node = 1;
  EXPECT_NEAR(comm(pair, 2, 1e9) - comm(pair, 2, 2e9), (1 + 2) * bytes / 2e9, 1e-12);
  // The shared mix's second word: one more word's alpha a neighbour.
  Cluster slow_words = one;
  slow_words.intra.alpha_s += 1e-3;
  EXPECT_NEAR(comm(slow_words, 2, 1e9) - comm(one, 2, 1e9), 2 * 1e-3, 1e-9);
  EXPECT_NEAR(comm(slow_words, 4, 1e9) - comm(one, 4, 1e9), 2 * 1e-3, 1e-9);  // ring at 4: one word each
  // Where the calibration timed the mix (Cluster::mix_points) that rate prices it, and the
  // element-wise rate no longer matters. It is looked up where the node's slots (2 per rank)
  // add up to the calibration's four of one size: at 2 ranks the model's size, at 4 twice it.
  Cluster timed = ideal(8);
  timed.mix_points = {{bytes / 2, 1 / 4e9}, {bytes * 2, 1 / (4e9 / 3)}};
  EXPECT_NEAR(timed.mix_bps(bytes), 2e9, 1);
  EXPECT_NEAR(timed.mix_bps(2 * bytes), 4e9 / 3, 1);
  EXPECT_NEAR(comm(timed, 2, 1e9), comm(timed, 2, 7e9), 1e-12);
  EXPECT_NEAR(comm(timed, 2, 1e9) - comm(one, 2, 2e9), 0, 1e-12);
  EXPECT_NEAR(comm(timed, 4, 1e9) - comm(one, 4, 4e9 / 3), 0, 1e-12);
}

// Ranks beyond the cores with the mix timed: the node's mixes take their whole traffic (deg +
// 3 models each through the window) at the timed rate on every core, capped by the node's
// streaming rate scaled by what the timed mix gained over one core's stream.
TEST(Simulator, OversubscribedGossipMixesAtTheTimedRateOnEveryCore) {
  ModelSpec mlp = ModelSpec::parse("mlp:784-256-128-10");
  Cluster c = ideal(2);
  c.gemm_flops = 1e14;  // compute and steps next to nothing: the mixes set the step
  c.sgd_ns_per_param = 0;
  c.elementwise_bps = 1e12;  // the activations' element-wise work next to nothing too
  c.elementwise_node_bps = 1.2e12;
  c.oversub_penalty = 1;  // a rank's own mix, stretched by time-sharing alone, is the node's share
  c.intra.alpha_s = 1e-9;  // and the neighbours' words next to nothing
  const double model_b = static_cast<double>(mlp.params()) * 4;
  c.mix_points = {{model_b, 1 / 20e9}};  // one point: flat, whatever the node's slots
  for (int n : {4, 8}) {
    const double step = simulate(mlp, {.strategy = "gossip", .dp = n}, c, 64).step_s;
    const double mixes = n * (2 + 3) * model_b / (2 * 20e9);  // min(2 x 20, max(2 x 20, 1200 x 20 / 1000))
    EXPECT_GE(step, mixes) << n;
    EXPECT_LT(step, mixes * 1.05) << n;
  }
  // Sixteen cores streaming 2.4x one core's element-wise rate: the mixes at 2.4x the timed
  // rate, not 16x.
  Cluster wide = c;
  wide.cores_per_node = 16;
  wide.elementwise_node_bps = 2.4e12;
  const double step = simulate(mlp, {.strategy = "gossip", .dp = 32}, wide, 64).step_s;
  const double mixes = 32 * (2 + 3) * model_b / (2.4 * 20e9);
  EXPECT_GE(step, mixes);
  EXPECT_LT(step, mixes * 1.05);
}

// The far verdict's mix rate is a cross-core one. Beyond the cores ring neighbours share a
// core but at the ends of each core's arc: a share min(1, 2 cores / ranks) of the mixes pays
// it, the rest mix at the close rate. With a core per rank every mix pays it.
TEST(Simulator, FarGossipBeyondTheCoresPaysTheCrossCoreRateAtTheArcsEndsOnly) {
  ModelSpec mlp = ModelSpec::parse("mlp:784-256-128-10");
  Cluster c = ideal(2);
  c.gemm_flops = 1e14;
  c.sgd_ns_per_param = 0;
  c.elementwise_bps = 1e12;
  c.elementwise_node_bps = 1.2e12;
  c.oversub_penalty = 1;
  c.intra.alpha_s = 1e-9;
  const double model_b = static_cast<double>(mlp.params()) * 4;
  const double close_bps = 40e9, far_bps = 8e9;
  c.mix_points = {{model_b, 1 / 20e9}};
  c.mix_points_by_cores = {{"close", {{model_b, 1 / close_bps}}}, {"far", {{model_b, 1 / far_bps}}}};
  const Cluster far = with_core_distance(c, true), close = with_core_distance(c, false);
  EXPECT_EQ(far.cores_verdict, "far");
  auto step = [&](const Cluster& k, int n) { return simulate(mlp, {.strategy = "gossip", .dp = n}, k, 64).step_s; };
  auto mixes = [&](int n, double across) {  // the node's mixes over its 2 cores
    return n * (2 + 3) * model_b * ((1 - across) / close_bps + across / far_bps) / 2;
  };
  for (int n : {4, 8, 16}) {
    const double across = std::min(1.0, 4.0 / n);
    const double refill = sim::lockstep_refill_s(c, n, model_b);  // ranks sharing a core
    EXPECT_GE(step(far, n), mixes(n, across)) << n;
    EXPECT_LT(step(far, n), mixes(n, across) * 1.05 + refill) << n;
    EXPECT_LT(step(close, n), mixes(n, 0) * 1.05 + refill) << n;
  }
  // At 8 ranks on 2 cores half the mixes pay it: below the whole mix at the far rate.
  EXPECT_LT(step(far, 8), 0.7 * mixes(8, 1));
  // A core per rank (2 ranks on 2 cores): the verdict's rate, whole.
  const double two = simulate(mlp, {.strategy = "gossip", .dp = 2}, far, 64).comm_s;
  const double two_close = simulate(mlp, {.strategy = "gossip", .dp = 2}, close, 64).comm_s;
  EXPECT_GT(two, 3 * two_close);
}

// With a core per rank on one host and no slots, the all-reduce reads its peers' buffers in
// place (coll/shm_direct.cc): no model-sized ring buffer, a 256 KiB-bounded piece of scratch
// per peer. With more ranks than cores it takes the slots by default and times the reads
// too (ShmContext::count_decision): localsgd holds the pieces as well.
TEST(Simulator, AllreduceScratchFollowsThePathTheCollectiveTakes) {
  ModelSpec mlp = ModelSpec::parse("mlp:784-256-128-10");
  const double bytes = mlp.params() * 4, order = testing::kOrder;
  auto buffers = [&](const Cluster& c, const char* s, int n) {
    return simulate(mlp, {.strategy = s, .dp = n}, c, 64).buffers_b;
  };
  const Cluster wide = ideal(16);
  for (int n : {2, 4, 8}) {
    const double pieces = (n - 1) * std::min(256.0 * 1024, bytes / n);
    EXPECT_NEAR(buffers(wide, "localsgd", n), order + pieces, 1e-6) << n;  // its one copy is the scratch's
    EXPECT_NEAR(buffers(wide, "fedavg", n), 2 * bytes + 2 * order + pieces, 1e-6) << n;  // and the clients' partition
  }
  const Cluster narrow = ideal(2);  // 4 ranks on 2 cores: the slots
  EXPECT_NEAR(buffers(narrow, "localsgd", 4), order + 3 * std::min(256.0 * 1024, bytes / 4), 1e-6);
  EXPECT_NEAR(buffers(narrow, "fedavg", 4), 2 * bytes + 2 * order, 1e-6);
  Cluster hosts = ideal(16);  // across hosts: the ring's receive buffer
  hosts.nodes = 2, hosts.ranks_per_node = 2;
  EXPECT_NEAR(buffers(hosts, "localsgd", 4), 2 * bytes + order, 1e-6);
}

// ddp at 2 ranks with a core each, its gradient in the window: where the cores are far apart
// each piece of the rank's block is reduced and stepped in the call's scratch and streamed
// into the slot (coll/shm_slots.cc apply_and_share), one piece of at most a slot more than
// close; at 4 ranks, or under the shared parameters (their own piece), nothing changes; a
// run that took both verdicts' paths holds the larger.
TEST(Simulator, FarDdpAtTwoRanksKeepsTheStreamedPiece) {
  ModelSpec mlp = ModelSpec::parse("mlp:784-256-128-10");
  const double bytes = mlp.params() * 4;
  const Cluster base = ideal(2), far = with_core_distance(base, true), close = with_core_distance(base, false);
  auto run = [&](const Cluster& c, int n, double bucket_mb = 1) {
    return simulate(mlp, {.strategy = "ddp", .dp = n, .zero = 1, .bucket_mb = bucket_mb}, c, 64);
  };
  EXPECT_NEAR(run(far, 2).buffers_b - run(close, 2).buffers_b, std::min(256.0 * 1024, std::min(bytes, 1048576.0) / 2),
              1e-6);
  EXPECT_NEAR(run(far, 2, 0.25).buffers_b - run(close, 2, 0.25).buffers_b, 0.25 * 1048576 / 2, 1e-6);  // half a bucket
  EXPECT_NEAR(run(far, 4).buffers_b, run(close, 4).buffers_b, 1e-6);
  ModelSpec big = ModelSpec::parse("mlp:784-2048-1024-10");  // 8 MiB and more: shared parameters
  auto shared = [&](const Cluster& c) { return simulate(big, {.strategy = "ddp", .dp = 2, .zero = 1}, c, 64).buffers_b; };
  EXPECT_NEAR(shared(far), shared(close), 1e-6);
  const Prediction blended = blend_times(run(close, 2), run(far, 2), 0.2);
  EXPECT_NEAR(blended.buffers_b, run(far, 2).buffers_b, 1e-6);
  EXPECT_NEAR(blend_times(run(far, 2), run(close, 2), 0).buffers_b, run(far, 2).buffers_b, 1e-6);
}

TEST(Simulator, LockstepRanksSharingACoreRefillTheirParameters) {
  ModelSpec mlp = ModelSpec::parse("mlp:784-256-128-10");
  const double bytes = mlp.params() * 4;
  const Cluster c = ideal(2);
  // k^2 refills of the parameters, k the ranks on the busiest core; none with a core each.
  EXPECT_EQ(sim::lockstep_refill_s(c, 2, bytes), 0);
  EXPECT_NEAR(sim::lockstep_refill_s(c, 4, bytes), 4 * bytes / c.elementwise_bps, 1e-15);
  EXPECT_NEAR(sim::lockstep_refill_s(c, 5, bytes), 9 * bytes / c.elementwise_bps, 1e-15);
  EXPECT_NEAR(sim::lockstep_refill_s(c, 8, bytes), 16 * bytes / c.elementwise_bps, 1e-15);
  // In the step: ddp and gossip meet every step and pay it; Local SGD does not. Halving the
  // rate doubles it (and nothing else in these steps reads that rate at 8 ranks).
  Cluster slow = c;
  slow.elementwise_bps = c.elementwise_bps / 2;
  auto comm = [&](const Cluster& k, const std::string& s) {
    return simulate(mlp, {.strategy = s, .dp = 8}, k, 64).comm_s;
  };
  EXPECT_NEAR(comm(slow, "ddp") - comm(c, "ddp"), sim::lockstep_refill_s(c, 8, bytes), 1e-9);
  EXPECT_GE(comm(slow, "gossip") - comm(c, "gossip"), sim::lockstep_refill_s(c, 8, bytes) - 1e-9);
  EXPECT_NEAR(comm(slow, "localsgd"), comm(c, "localsgd"), 1e-12);
}

TEST(Simulator, RefusesLayoutsTheExecutorsRefuse) {
  ModelSpec gpt = ModelSpec::parse(kGpt), mlp = ModelSpec::parse("mlp:784-10");
  Cluster c = ideal();
  EXPECT_THROW(simulate(gpt, {.strategy = "tp", .tp = 3}, c, 12), InvalidArgument);       // heads % tp
  EXPECT_THROW(simulate(gpt, {.strategy = "pp", .pp = 8}, c, 16), InvalidArgument);       // more stages than units
  EXPECT_THROW(simulate(gpt, {.strategy = "ddp", .dp = 4}, c, 6), InvalidArgument);      // batch % dp
  EXPECT_THROW(simulate(mlp, {.strategy = "tp", .tp = 2}, c, 64), InvalidArgument);      // tp needs the GPT
  EXPECT_THROW(simulate(gpt, {.strategy = "hybrid", .dp = 2, .pp = 2, .zero = 3}, c, 8), InvalidArgument);
}

TEST(Simulator, FedAvgPricesTheSampledClientsOnTheirRanks) {
  ModelSpec m = ModelSpec::parse("mlp:784-256-10");
  Cluster c = ideal(2);
  c.oversub_penalty = 1.0;
  // One client per round: it trains alone, at the whole minibatch, like one rank of localsgd.
  Prediction alone = simulate(m, {.strategy = "fedavg", .dp = 2, .clients = 1, .client_fraction = 1}, c, 64);
  Prediction one_rank = simulate(m, {.strategy = "localsgd", .dp = 1}, c, 64);
  EXPECT_NEAR(alone.compute_s, one_rank.compute_s, 1e-12);
  // Two clients, one on each rank (k mod 2): the two cores train them at once, so a
  // minibatch of examples costs half a client step.
  Prediction both = simulate(m, {.strategy = "fedavg", .dp = 2, .clients = 2, .client_fraction = 1}, c, 64);
  EXPECT_NEAR(both.compute_s, alone.compute_s / 2, 1e-12);
  // Four clients on two ranks (two each) on ONE core: the ranks share it while both run.
  Cluster one = ideal(1);
  one.oversub_penalty = 1.0;
  Prediction shared = simulate(m, {.strategy = "fedavg", .dp = 2, .clients = 4, .client_fraction = 1}, one, 64);
  EXPECT_NEAR(shared.compute_s, alone.compute_s, 1e-12);  // 4 client steps, 2 at a time at half speed: 4 / 4
}

TEST(Simulator, FedAvgWaitsForTheBusiestCore) {
  ModelSpec m = ModelSpec::parse("mlp:784-256-10");
  Cluster c = ideal(2);
  c.oversub_penalty = 1.0;
  Prediction alone = simulate(m, {.strategy = "fedavg", .dp = 3, .clients = 1, .client_fraction = 1}, c, 64);
  // Three clients, one per rank, on two cores: one core runs two of them, and the round
  // waits for those (2 client steps of wall for 3 minibatches), not 3 / 2.
  Prediction three = simulate(m, {.strategy = "fedavg", .dp = 3, .clients = 3, .client_fraction = 1}, c, 64);
  EXPECT_NEAR(three.compute_s, alone.compute_s * 2 / 3, 1e-12);
}

// ddp's cut of the batch (Layout::batch_split, parallel/batch_split.h): a measured cut takes
// equally long on every rank, so the step is the even cut's, and the busiest rank holds the
// activations of the band's top share; with more ranks than cores auto cuts evenly; fixed
// weights price the largest share for both.
TEST(Simulator, DdpBatchSplitPricesTheBusiestRanksShare) {
  ModelSpec m = ModelSpec::parse("mlp:784-256-128-10");
  const int64_t batch = 64;  // 32 items a rank: the small products take every share here
  auto run = [&](Layout l, int cores) { return simulate(m, l, ideal(cores), batch); };
  const Prediction even = run({.strategy = "ddp", .dp = 2, .batch_split = 0}, 8);
  const Prediction measured = run({.strategy = "ddp", .dp = 2, .batch_split = 1}, 8);
  const Prediction automatic = run({.strategy = "ddp", .dp = 2}, 8);
  EXPECT_DOUBLE_EQ(measured.step_s, even.step_s);
  // 32 items even, ceil(64 x 0.6 + 0.5) = 39 at the band's top: what an even cut of 78 gives.
  EXPECT_GT(measured.activations_b, even.activations_b * 1.1);
  EXPECT_DOUBLE_EQ(measured.activations_b,
                   simulate(m, {.strategy = "ddp", .dp = 2, .batch_split = 0}, ideal(8), 78).activations_b);
  EXPECT_DOUBLE_EQ(automatic.activations_b, measured.activations_b);
  // Four ranks on two cores: auto cuts evenly, as the executor does.
  EXPECT_DOUBLE_EQ(run({.strategy = "ddp", .dp = 4}, 2).activations_b,
                   run({.strategy = "ddp", .dp = 4, .batch_split = 0}, 2).activations_b);
  // Fixed weights 3:1: the 48-item rank sets the step and the memory.
  const Prediction fixed = run({.strategy = "ddp", .dp = 2, .batch_share_max = 0.75}, 8);
  EXPECT_GT(fixed.compute_s, even.compute_s * 1.4);
  EXPECT_GT(fixed.activations_b, measured.activations_b);
  // Other strategies cut evenly whatever the layout says.
  EXPECT_DOUBLE_EQ(run({.strategy = "localsgd", .dp = 2, .batch_split = 1}, 8).activations_b,
                   run({.strategy = "localsgd", .dp = 2}, 8).activations_b);
}

TEST(Simulator, SlotAllReduceKeepsNoModelSizedBuffer) {
  ModelSpec m = ModelSpec::parse("mlp:784-256-128-10");
  const double bytes = m.params() * 4;
  // Four ranks on two cores: localsgd's all-reduce goes through the shared-memory slots, which
  // keep no model-sized buffer (its one copy less one; the epoch's order besides); with a core
  // each the cross-memory reads keep none either, but a piece of scratch per peer (measured on
  // a 16-core Xeon; AllreduceScratchFollowsThePathTheCollectiveTakes). Ranks beyond the cores
  // time both paths (ShmContext::count_decision): the pieces are held on the slots too.
  Prediction slots = simulate(m, {.strategy = "localsgd", .dp = 4}, ideal(2), 64);
  Prediction reads4 = simulate(m, {.strategy = "localsgd", .dp = 4}, ideal(8), 64);
  EXPECT_NEAR(slots.buffers_b, testing::kOrder + 3 * std::min(256.0 * 1024, bytes / 4), 1e-6);
  EXPECT_NEAR(reads4.buffers_b, testing::kOrder + 3 * bytes / 4, 1e-6);
  // ddp on one node reduces from its gradient window in place, and the window is its
  // gradient: no model-sized copy on either path, the epoch's order. With its fused ZeRO a
  // model below kSharedParamsMinBytes keeps its own parameters (nothing more); asked to share
  // them, or from that size on, the node's shared copy and a 256 KiB piece are counted too.
  ModelSpec big = ModelSpec::parse("mlp:784-1024-1024-1024-10");
  const double big_bytes = big.params() * 4, staging = testing::kOrder, piece = 256.0 * 1024;
  ASSERT_LT(bytes, kSharedParamsMinBytes);
  ASSERT_GE(big_bytes, kSharedParamsMinBytes);
  for (int cores : {2, 8}) {
    EXPECT_NEAR(simulate(m, {.strategy = "ddp", .dp = 4}, ideal(cores), 64).buffers_b, staging, 1e-6) << cores;
    EXPECT_NEAR(simulate(m, {.strategy = "ddp", .dp = 4, .zero = 1}, ideal(cores), 64).buffers_b, staging, 1e-6)
        << cores;
    EXPECT_NEAR(simulate(m, {.strategy = "ddp", .dp = 4, .zero = 1, .shared_params = 1}, ideal(cores), 64).buffers_b,
                bytes + staging + piece, 1e-6)
        << cores;
    EXPECT_NEAR(simulate(big, {.strategy = "ddp", .dp = 4, .zero = 1}, ideal(cores), 64).buffers_b,
                big_bytes + staging + piece, 1e-6)
        << cores;
    EXPECT_NEAR(simulate(big, {.strategy = "ddp", .dp = 4, .zero = 1, .shared_params = 0}, ideal(cores), 64).buffers_b,
                staging, 1e-6)
        << cores;
  }
  // A core per rank: the slots only where the calibration saw the executors take them (the
  // cores close), from the size it saw; 2 ranks on 8 cores, localsgd's 0.94 MB all-reduce.
  // Elsewhere 2 ranks read each other's buffers: no model-sized copy either, the same order
  // and a 256 KiB piece of the peer's half besides. Two ranks that take the slots have timed
  // the reads too (DTRAIN_SHM_TIMED_PATHS): the piece is held either way.
  const double reads = testing::kOrder + 256.0 * 1024;
  Cluster close = ideal(8);
  EXPECT_NEAR(simulate(m, {.strategy = "localsgd", .dp = 2}, close, 64).buffers_b, reads, 1e-6);
  close.intra_sizes.allreduce_slots_from_by_ranks[2] = 256 << 10;
  EXPECT_NEAR(simulate(m, {.strategy = "localsgd", .dp = 2}, close, 64).buffers_b, reads, 1e-6);
  close.intra_sizes.allreduce_slots_from_by_ranks[4] = 256 << 10;  // 4 ranks time no paths
  EXPECT_NEAR(simulate(m, {.strategy = "localsgd", .dp = 4}, close, 64).buffers_b, testing::kOrder, 1e-6);
  close.intra_sizes.allreduce_slots_from_by_ranks[2] = 4 << 20;  // slots only above the model's size
  EXPECT_NEAR(simulate(m, {.strategy = "localsgd", .dp = 2}, close, 64).buffers_b, reads, 1e-6);
  // From the calibration's rows: the sizes from which every larger call took the slots.
  EXPECT_EQ(slots_from_sizes({{65536, false}, {262144, true}, {1 << 20, true}}), 262144);
  EXPECT_EQ(slots_from_sizes({{65536, true}, {262144, false}, {1 << 20, true}}), 1 << 20);
  EXPECT_EQ(slots_from_sizes({{65536, true}, {1 << 20, false}}), 0);
  EXPECT_EQ(slots_from_sizes({}), 0);
  // The file carries it, and a malformed entry is refused.
  close.intra_sizes.allreduce_slots_from_by_ranks[2] = 262144;
  nlohmann::json j = link_sizes_json(close.intra_sizes);
  EXPECT_DOUBLE_EQ(link_sizes_from_json(j, "t").allreduce_slots_from_by_ranks.at(2), 262144);
  j["allreduce_slots_from_by_ranks"]["1"] = 1024;
  EXPECT_THROW(link_sizes_from_json(j, "t"), InvalidArgument);
}

// ddp on one host reduces its buckets in place in the gradient's window: where the calibration
// timed that (allreduce_window_by_ranks) its buckets are priced with it, not with the plain
// all-reduce; other strategies and rank counts it did not time keep the plain tables.
TEST(Simulator, DdpOnOneHostPricesItsWindowAllreduce) {
  ModelSpec m = ModelSpec::parse("mlp:784-256-128-10");
  Cluster c = ideal(2);
  c.intra_sizes.allreduce_by_ranks[8] = {{1e3, 4e-4}, {1e9, 4e-4}};  // plain: 400 us at every size
  const Layout ddp{.strategy = "ddp", .dp = 8};
  // The buckets' all-reduces: the step's exposed communication less the ranks' cache refills
  // (8 ranks on 2 cores, sim_costs.h lockstep_refill_s).
  const double refill = sim::lockstep_refill_s(c, 8, m.params() * 4.0);
  auto comm = [&](const Cluster& k) { return simulate(m, ddp, k, 64).comm_s - refill; };
  const double plain = comm(c);
  ASSERT_GT(plain, 0);
  c.intra_sizes.allreduce_window_by_ranks[8] = {{1e3, 2e-4}, {1e9, 2e-4}};  // in the window: 200 us
  EXPECT_NEAR(comm(c), plain / 2, 1e-12);
  const Layout local{.strategy = "localsgd", .dp = 8};
  Cluster plain_only = c;
  plain_only.intra_sizes.allreduce_window_by_ranks.clear();
  EXPECT_DOUBLE_EQ(simulate(m, local, c, 64).comm_s, simulate(m, local, plain_only, 64).comm_s);
  c.intra_sizes.allreduce_window_by_ranks.erase(8);
  c.intra_sizes.allreduce_window_by_ranks[4] = {{1e3, 1e-5}};
  EXPECT_NEAR(comm(c), plain, 1e-12);  // not timed at 8 ranks: the plain figure
  // Through the file and back.
  c.intra_sizes.allreduce_window_by_ranks[8] = {{1e6, 2e-4}};
  const LinkSizes back = link_sizes_from_json(link_sizes_json(c.intra_sizes), "t");
  EXPECT_EQ(back.allreduce_window_by_ranks, c.intra_sizes.allreduce_window_by_ranks);
  // By the cores' verdict: a far run takes the far window table over the sizes it spans; a
  // verdict that timed only the window leaves the plain tables and their slots alone.
  c.intra_sizes.allreduce_window_by_ranks[8] = {{1e3, 2e-4}, {1e9, 2e-4}};
  c.intra_sizes.allreduce_slots_from_by_ranks[2] = 262144;
  LinkSizes::VerdictTables far;
  far.allreduce_window = {{1e3, 6e-4}, {1e9, 6e-4}};
  c.intra_sizes.by_cores_by_ranks[8]["far"] = far;
  c.intra_sizes.two_rank_by_cores["far"] = far;
  const double close_s = comm(with_core_distance(c, false));
  EXPECT_NEAR(close_s, plain / 2, 1e-12);
  const Cluster far_c = with_core_distance(c, true);
  EXPECT_NEAR(comm(far_c), 3 * close_s, 1e-12);
  EXPECT_EQ(far_c.intra_sizes.allreduce_by_ranks, c.intra_sizes.allreduce_by_ranks);
  EXPECT_EQ(far_c.intra_sizes.allreduce_slots_from_by_ranks.at(2), 262144);
  const LinkSizes again = link_sizes_from_json(link_sizes_json(c.intra_sizes), "t");
  EXPECT_EQ(again.by_cores_by_ranks.at(8).at("far").allreduce_window, far.allreduce_window);
}

TEST(Simulator, CalibratedGapFactorPricesCollectivesBetweenComputeSteps) {
  ModelSpec m = ModelSpec::parse("mlp:784-256-128-10");
  Cluster c = ideal(2);
  c.intra_sizes.allreduce_by_ranks[8] = {{1e3, 1e-4}, {1e9, 1e-4}};  // 100 us at every size
  const Layout l{.strategy = "ddp", .dp = 8, .bucket_mb = 16};
  // The all-reduce's part of the exposed communication (less the ranks' cache refills).
  const double refill = sim::lockstep_refill_s(c, 8, m.params() * 4.0);
  const double back_to_back = simulate(m, l, c, 64).comm_s - refill;
  ASSERT_GT(back_to_back, 0);
  c.intra_sizes.gap_factor_by_ranks[8] = 1.5;
  EXPECT_NEAR(simulate(m, l, c, 64).comm_s - refill, 1.5 * back_to_back, 1e-12);
  c.intra_sizes.gap_factor_by_ranks[4] = 2.0;  // another rank count: no effect at 8
  EXPECT_NEAR(simulate(m, l, c, 64).comm_s - refill, 1.5 * back_to_back, 1e-12);
  // Through the calibration file and back; a factor below 1 is refused.
  Cluster back = cluster_from_json(cluster_to_json(c), "roundtrip");
  EXPECT_DOUBLE_EQ(back.intra_sizes.gap_factor_by_ranks.at(8), 1.5);
  nlohmann::json bad = link_sizes_json(c.intra_sizes);
  bad["gap_factor_by_ranks"]["8"] = 0.5;
  EXPECT_THROW(link_sizes_from_json(bad, "links"), InvalidArgument);
}

// Ranks beyond the cores that meet after a stretch of compute (Cluster::meeting_penalty):
// Local SGD's steps between averages, fedavg's rounds and the GPT's pipelines and ZeRO pay
// (1 + alpha) on that compute; the penalty is 0 where the ranks fit the cores, linear between
// calibrated counts (from 0 at the cores) and flat beyond them; tensor-parallel layouts
// (timed across their ranks) keep their price. ddp pays it on forward and backward, and its
// buckets' all-reduces are then priced back to back: the gap factor, which took the same
// imbalance as a multiple of the call, is not charged as well.
TEST(Simulator, RanksBeyondTheCoresPayTheCoresImbalanceBetweenMeetings) {
  Cluster c = ideal(2);
  c.intra_sizes.meeting_penalty_by_ranks = {{4, 0.1}, {8, 0.3}};
  EXPECT_DOUBLE_EQ(c.meeting_penalty(2), 0.0);
  EXPECT_DOUBLE_EQ(c.meeting_penalty(3), 0.05);
  EXPECT_DOUBLE_EQ(c.meeting_penalty(4), 0.1);
  EXPECT_DOUBLE_EQ(c.meeting_penalty(6), 0.2);
  EXPECT_DOUBLE_EQ(c.meeting_penalty(16), 0.3);
  Cluster none = c;
  none.intra_sizes.meeting_penalty_by_ranks.clear();
  EXPECT_DOUBLE_EQ(none.meeting_penalty(8), 0.0);

  ModelSpec m = ModelSpec::parse("mlp:784-256-128-10");
  const Layout ls{.strategy = "localsgd", .dp = 8};
  const Prediction plain = simulate(m, ls, none, 64), met = simulate(m, ls, c, 64);
  EXPECT_NEAR(met.compute_s, 1.3 * plain.compute_s, 1e-12);
  EXPECT_NEAR(met.optimizer_s, 1.3 * plain.optimizer_s, 1e-12);
  EXPECT_DOUBLE_EQ(simulate(m, {.strategy = "localsgd", .dp = 2}, c, 64).compute_s,
                   simulate(m, {.strategy = "localsgd", .dp = 2}, none, 64).compute_s);
  // fedavg: 4 clients on 4 ranks, all training at once, then the round's meeting.
  const Layout fed{.strategy = "fedavg", .dp = 4, .clients = 4, .client_fraction = 1};
  EXPECT_NEAR(simulate(m, fed, c, 64).compute_s, 1.1 * simulate(m, fed, none, 64).compute_s, 1e-12);
  const Layout ddp{.strategy = "ddp", .dp = 8, .bucket_mb = 16};
  c.intra_sizes.allreduce_by_ranks[8] = {{1e3, 1e-4}, {1e9, 1e-4}};  // 100 us at every size
  none.intra_sizes.allreduce_by_ranks = c.intra_sizes.allreduce_by_ranks;
  const Prediction d_none = simulate(m, ddp, none, 64), d_met = simulate(m, ddp, c, 64);
  EXPECT_NEAR(d_met.compute_s, 1.3 * d_none.compute_s, 1e-12);
  EXPECT_DOUBLE_EQ(d_met.comm_s, d_none.comm_s);
  Cluster gapped = c, gapped_none = none;
  gapped.intra_sizes.gap_factor_by_ranks[8] = gapped_none.intra_sizes.gap_factor_by_ranks[8] = 1.5;
  EXPECT_DOUBLE_EQ(simulate(m, ddp, gapped, 64).comm_s, d_met.comm_s) << "back to back where the penalty is charged";
  EXPECT_GT(simulate(m, ddp, gapped_none, 64).comm_s, d_none.comm_s) << "the gap factor where none is calibrated";
  EXPECT_DOUBLE_EQ(simulate(m, {.strategy = "ddp", .dp = 2}, c, 64).step_s,
                   simulate(m, {.strategy = "ddp", .dp = 2}, none, 64).step_s);

  ModelSpec g = ModelSpec::parse(kGpt);
  // The GPT's layouts pay it by their stretch between meetings (the next test): a pipeline's
  // ranks meet at every forward and backward of a micro-batch.
  const Layout pp{.strategy = "pp", .pp = 4, .micro = 4};
  const double pp_none = simulate(g, pp, none, 8).compute_s;
  EXPECT_NEAR(simulate(g, pp, c, 8).compute_s, (1 + c.meeting_penalty(4, pp_none / (2 * 4))) * pp_none, 1e-9);
  const Layout tp{.strategy = "tp", .tp = 4};
  EXPECT_DOUBLE_EQ(simulate(g, tp, c, 8).step_s, simulate(g, tp, none, 8).step_s);
  // Through the calibration file and back; a negative penalty is refused.
  const LinkSizes back = link_sizes_from_json(link_sizes_json(c.intra_sizes), "roundtrip");
  EXPECT_EQ(back.meeting_penalty_by_ranks, c.intra_sizes.meeting_penalty_by_ranks);
  nlohmann::json bad = link_sizes_json(c.intra_sizes);
  bad["meeting_penalty_by_ranks"]["8"] = -0.1;
  EXPECT_THROW(link_sizes_from_json(bad, "links"), InvalidArgument);
}

// The kernel's balancer evens out a long stretch of compute between meetings: alpha is the
// calibrated one up to the knee (kMeetingKneeS), then falls with the tail's exponent.
TEST(Simulator, TheMeetingPenaltyShrinksWithTheStretchBetweenMeetings) {
  Cluster c = ideal(2);
  c.intra_sizes.meeting_penalty_by_ranks = {{4, 0.2}, {8, 0.4}};
  const double knee = kMeetingKneeS;
  EXPECT_DOUBLE_EQ(c.meeting_penalty(4, 0), 0.2);
  EXPECT_DOUBLE_EQ(c.meeting_penalty(4, knee / 2), 0.2);
  EXPECT_DOUBLE_EQ(c.meeting_penalty(4, knee), 0.2);
  EXPECT_NEAR(c.meeting_penalty(4, 4 * knee), 0.2 * std::pow(0.25, kMeetingTailExponent), 1e-12);
  EXPECT_NEAR(c.meeting_penalty(8, 9 * knee), 0.4 * std::pow(1.0 / 9, kMeetingTailExponent), 1e-12);
  EXPECT_NEAR(c.meeting_penalty(6, 9 * knee), 0.3 * std::pow(1.0 / 9, kMeetingTailExponent), 1e-12);
  EXPECT_DOUBLE_EQ(c.meeting_penalty(2, 1.0), 0.0);  // ranks that fit the cores
  // A data-parallel GPT meets once a step: its whole forward and backward is one stretch.
  Cluster none = c;
  none.intra_sizes.meeting_penalty_by_ranks.clear();
  ModelSpec g = ModelSpec::parse(kGpt);
  const Layout zero1{.strategy = "zero", .dp = 4, .zero = 1};
  const double z_none = simulate(g, zero1, none, 16).compute_s;
  EXPECT_NEAR(simulate(g, zero1, c, 16).compute_s, (1 + c.meeting_penalty(4, z_none)) * z_none, 1e-9);
  EXPECT_LT(c.meeting_penalty(4, z_none), 0.2);
}

TEST(Simulator, TheOptimizerSetsItsStateAndTheRateOfItsStep) {
  ModelSpec m = ModelSpec::parse("mlp:100-10");  // 1010 parameters
  Cluster c = ideal();
  // Timed rates per family: (parameters, ns per parameter), interpolated in log(parameters).
  c.optimizer_rates = {{"sgd", {{1000, 1.0}, {4000, 3.0}}}, {"momentum", {{1000, 2.0}}}, {"adamw", {{1000, 4.0}}}};
  EXPECT_DOUBLE_EQ(c.optimizer_ns("sgd", 500), 1.0);    // flat below the first point
  EXPECT_DOUBLE_EQ(c.optimizer_ns("sgd", 2000), 2.0);   // halfway in log(parameters)
  EXPECT_DOUBLE_EQ(c.optimizer_ns("sgd", 1e6), 3.0);    // flat beyond the last
  auto run = [&](const std::string& optimizer) {
    Layout l{.strategy = "single"};
    l.optimizer = optimizer;
    return simulate(m, l, c, 50);
  };
  // dtrain train's MLP default is plain SGD: no state array.
  Prediction plain = run(""), sgd = run("sgd"), mom = run("momentum"), nes = run("nesterov"), adamw = run("adamw");
  EXPECT_DOUBLE_EQ(plain.optimizer_b, 0);
  EXPECT_DOUBLE_EQ(sgd.optimizer_b, 0);
  EXPECT_DOUBLE_EQ(mom.optimizer_b, 1010 * 4.0);
  EXPECT_DOUBLE_EQ(nes.optimizer_b, 1010 * 4.0);
  EXPECT_DOUBLE_EQ(adamw.optimizer_b, 2 * 1010 * 4.0);
  EXPECT_DOUBLE_EQ(mom.memory_b() - plain.memory_b(), 1010 * 4.0);
  EXPECT_NEAR(plain.optimizer_s, 1010 * c.optimizer_ns("sgd", 1010) * 1e-9, 1e-15);
  EXPECT_NEAR(mom.optimizer_s, 1010 * 2.0e-9, 1e-15);
  EXPECT_NEAR(adamw.optimizer_s, 1010 * 4.0e-9, 1e-15);
  // The GPT's default is AdamW.
  ModelSpec g = ModelSpec::parse(kGpt);
  Layout gl{.strategy = "single"};
  Prediction gd = simulate(g, gl, c, 4);
  gl.optimizer = "adamw";
  EXPECT_DOUBLE_EQ(gd.optimizer_b, simulate(g, gl, c, 4).optimizer_b);
  gl.optimizer = "sgd";
  EXPECT_DOUBLE_EQ(simulate(g, gl, c, 4).optimizer_b, 0);
  // Without timed rates: AdamW's and momentum's scalars, plain SGD at 12/20 of momentum's.
  Cluster old = ideal();
  old.optimizer_ns_per_param = 0.7, old.sgd_ns_per_param = 0.5;
  EXPECT_DOUBLE_EQ(old.optimizer_ns("adamw", 1e6), 0.7);
  EXPECT_DOUBLE_EQ(old.optimizer_ns("momentum", 1e6), 0.5);
  EXPECT_DOUBLE_EQ(old.optimizer_ns("sgd", 1e6), 0.3);
  // Names as dtrain train takes them; anything else is refused.
  EXPECT_EQ(optimizer_family("adam", false), "adamw");
  EXPECT_EQ(optimizer_family("", true), "adamw");
  EXPECT_EQ(optimizer_family("", false), "sgd");
  EXPECT_THROW(run("lamb"), InvalidArgument);
}

TEST(Simulator, OptimizerRatesRoundTripAndMalformedOnesAreRefused) {
  Cluster c = ideal();
  c.optimizer_rates = {{"momentum", {{65536, 0.16}, {1048576, 0.44}}}};
  Cluster back = cluster_from_json(cluster_to_json(c), "round-trip");
  EXPECT_EQ(back.optimizer_rates, c.optimizer_rates);
  for (const char* bad : {R"({"lamb": [[1000, 1]]})", R"({"sgd": [[1000, 1], [500, 2]]})", R"({"sgd": [[1000, 0]]})",
                          R"({"sgd": [1000, 1]})", R"([1, 2])"})
    EXPECT_THROW(optimizer_rates_from_json(nlohmann::json::parse(bad), "rates"), InvalidArgument) << bad;
}

TEST(Simulator, OptimizerStateLivesWhereTheStrategyKeepsIt) {
  ModelSpec m = ModelSpec::parse("mlp:100-10");  // 1010 parameters, 4040 bytes
  Cluster c = ideal();
  auto mem = [&](const std::string& strategy, int dp, int zero, const std::string& optimizer) {
    Layout l{.strategy = strategy, .dp = dp, .zero = zero};
    l.optimizer = optimizer;
    return simulate(m, l, c, 64);
  };
  // ddp's ZeRO 1-2 keeps the rank's 1/N slice of the state; without ZeRO, all of it.
  EXPECT_DOUBLE_EQ(mem("ddp", 4, 1, "adamw").optimizer_b, 2 * 4040.0 / 4);
  EXPECT_DOUBLE_EQ(mem("ddp", 4, 2, "momentum").optimizer_b, 4040.0 / 4);
  EXPECT_DOUBLE_EQ(mem("ddp", 4, 0, "momentum").optimizer_b, 4040.0);
  EXPECT_DOUBLE_EQ(mem("localsgd", 4, 0, "adamw").optimizer_b, 2 * 4040.0);
  // A parameter server's workers run no optimizer; the server holds its slice's state, so with
  // the server the busiest rank, AdamW adds two slices to the reported memory.
  const Prediction sgd = mem("ps", 8, 0, "sgd"), adamw = mem("ps", 8, 0, "adamw");
  EXPECT_DOUBLE_EQ(adamw.optimizer_b, 0);
  EXPECT_DOUBLE_EQ(adamw.memory_b() - sgd.memory_b(), 2 * 4040.0);
  // A synchronous server on one host reads the pushes in the workers' window slots: no push
  // buffer per worker, so its memory does not grow with them; across hosts it does.
  auto sync_ps = [&](int ranks, const Cluster& on) {
    Layout l{.strategy = "ps", .dp = ranks};
    l.ps_sync = true;
    l.optimizer = "sgd";
    return simulate(m, l, on, 1).memory_b();  // a row in all: the server is the busiest rank
  };
  EXPECT_DOUBLE_EQ(sync_ps(8, c), sync_ps(4, c));
  Cluster hosts = ideal();
  hosts.nodes = 2, hosts.ranks_per_node = 4;
  EXPECT_NEAR(sync_ps(8, hosts) - sync_ps(8, c), (7 - 1) * 4040.0, 1e-6);
}

}  // namespace

// Ranks beyond the cores (gossip, sync ps): the memory-bound part of the node's work in a step
// (gossip's mix, the window's copies, a server's sums) goes at the node's streaming rate with
// every core at it (Cluster::node_stream_bps), not at one core's rate times the cores: the
// cores share the memory. Without a measured node rate it is the cores times one core's, and
// the compute part keeps the time-sharing penalty either way.
TEST(Simulator, RanksBeyondTheCoresShareTheMemoryBandwidth) {
  ModelSpec mlp = ModelSpec::parse("mlp:784-256-128-10");
  Cluster c = ideal(2);
  c.gemm_flops = 1e14;  // compute and steps next to nothing: the memory-bound work sets the step
  c.sgd_ns_per_param = 0;
  c.elementwise_bps = 10e9;
  EXPECT_DOUBLE_EQ(c.node_stream_bps(), 20e9);  // not measured: 2 cores x one core's
  const double model_b = static_cast<double>(mlp.params()) * 4;
  const Layout gossip{.strategy = "gossip", .dp = 8}, ps{.strategy = "ps", .dp = 8, .servers = 1, .ps_sync = true};
  for (const Layout& l : {gossip, ps}) {
    const double unmeasured = simulate(mlp, l, c, 64).step_s;
    Cluster same = c;
    same.elementwise_node_bps = 20e9;  // measured, and equal to the fallback: the same step
    EXPECT_DOUBLE_EQ(simulate(mlp, l, same, 64).step_s, unmeasured) << l.describe();
    // Two cores streaming a quarter of one core's bytes between them (slow enough to set the
    // step over the ranks' cache refills, sim_costs.h lockstep_refill_s): the step is the node's
    // streamed bytes over that rate (8 ranks' mixes of 3 models read; 7 workers' pulls, read and
    // written, and the server's sums of 7 pushes: 4 bytes a parameter each, the running sum
    // staying in the cache, or 12 where the sum takes more than half of it).
    const std::vector<double> llcs = l.strategy == "ps" ? std::vector<double>{32.0 * (1 << 20), 1.0 * (1 << 20)}
                                                        : std::vector<double>{32.0 * (1 << 20)};
    for (const double llc : llcs) {
      Cluster shared = c;
      shared.elementwise_node_bps = 2.5e9;
      shared.llc_bytes = llc;
      const double sum_bytes = model_b <= llc / 2 ? 4 : 12;
      const double streamed =
          l.strategy == "gossip" ? 8 * 3 * model_b : 7 * 2 * model_b + 7 * model_b / 4 * sum_bytes;
      const double step = simulate(mlp, l, shared, 64).step_s;
      EXPECT_GT(step, unmeasured) << l.describe();
      EXPECT_GE(step, streamed / 2.5e9) << l.describe() << " llc " << llc;  // plus the little compute left
      EXPECT_LT(step, streamed / 2.5e9 * 1.05) << l.describe() << " llc " << llc;
    }
  }
}

}  // namespace dtrain::plan
