// A job over tcp, on one host or across hosts, is priced on the tcp link and takes none of the
// shared-memory paths (plan/fabric.cc over_fabric); a one-way send takes its own table.
#include <gtest/gtest.h>

#include "base/error.h"
#include "plan/closed_forms.h"
#include "plan/cluster.h"
#include "plan/sim_costs.h"
#include "plan/simulator.h"
#include "sim_test_util.h"

namespace dtrain::plan {
namespace {

using testing::ideal;

// This host: shared memory 10x faster than loopback tcp, a tcp table at 2 ranks whose one-way
// sends take half an exchange, and a link between hosts 10x slower still.
Cluster host() {
  Cluster c = ideal(2);
  c.intra.alpha_s = 1e-6, c.intra.beta_s_per_byte = 1e-10;
  c.inter.alpha_s = 1e-5, c.inter.beta_s_per_byte = 1e-9;
  c.inter_sizes.p = 2;
  for (double b : {65536.0, 1048576.0, 16777216.0}) {
    c.inter_sizes.allreduce.push_back({b, 2e-5 + b * 1e-9});
    c.inter_sizes.exchange.push_back({b, 1e-5 + b * 1e-9});
    c.inter_sizes.send.push_back({b, 1e-5 + b * 0.5e-9});
  }
  c.hosts_link.alpha_s = 5e-5, c.hosts_link.beta_s_per_byte = 1e-8;
  c.hosts_sizes.p = 2;
  c.hosts_calibrated = true;
  c.intra_sizes.meeting_penalty_by_ranks[4] = 0.3;  // timed on the shared-memory paths
  return c;
}

const ModelSpec& mlp() {
  static const ModelSpec m = ModelSpec::parse("mlp:784-256-128-10");
  return m;
}

Layout ddp(int n) {
  Layout l;
  l.strategy = "ddp";
  l.dp = n;
  return l;
}

TEST(Fabric, ShmLeavesTheMachineAsItIs) {
  const Cluster c = host();
  const Cluster same = over_fabric(c, "shm", 1, 0);
  EXPECT_TRUE(same.shared_memory);
  EXPECT_EQ(same.source, c.source);
  EXPECT_DOUBLE_EQ(simulate(mlp(), ddp(2), same, 64).step_s, simulate(mlp(), ddp(2), c, 64).step_s);
}

TEST(Fabric, TcpOnOneHostTakesTheTcpLinkAndNoSharedMemoryPath) {
  const Cluster c = host();
  const Cluster tcp = over_fabric(c, "tcp", 1, 0);
  EXPECT_FALSE(tcp.shared_memory);
  EXPECT_FALSE(tcp.shares_memory(2));
  EXPECT_TRUE(c.shares_memory(2));
  EXPECT_DOUBLE_EQ(tcp.intra.alpha_s, c.inter.alpha_s);
  EXPECT_NE(tcp.source.find("over tcp (loopback)"), std::string::npos) << tcp.source;
  // The meeting penalty is the cores' imbalance, whatever the link: it stays.
  EXPECT_GT(c.meeting_penalty(4), 0);
  EXPECT_EQ(tcp.meeting_penalty(4), c.meeting_penalty(4));
  ASSERT_TRUE(tcp.timed_on);
  EXPECT_TRUE(tcp.timed_on->shared_memory);
  // The all-reduce is the tcp table's at its size (1 MiB: 20 us + 1.05 ms), not shared memory's.
  const Prediction on_shm = simulate(mlp(), ddp(2), c, 64), on_tcp = simulate(mlp(), ddp(2), tcp, 64);
  EXPECT_GT(on_tcp.comm_s, 5 * on_shm.comm_s);
  EXPECT_NEAR(tcp.measured_allreduce_s(2, 1048576.0), 2e-5 + 1048576.0 * 1e-9, 1e-9);
  // ddp's fused ZeRO over tcp keeps its padded copy, slice and staged chunks (simulate_data_parallel.cc).
  Layout z = ddp(2);
  z.zero = 1;
  EXPECT_GT(simulate(mlp(), z, tcp, 64).memory_b(), simulate(mlp(), ddp(2), tcp, 64).memory_b());
}

// Over loopback tcp the copies are kernel work on the ranks' own cores, so the calibration
// times the tcp collectives at each rank count (`bench calibrate`, links_by_size.inter's
// *_by_ranks) and a job over tcp on one host is priced from those tables, not from shared
// memory's tables at that count nor from the ring formula on the 2-rank link (4 ranks on
// 2 cores, 1 MiB: 737 us measured against 451 so priced, 2026-12-04).
TEST(Fabric, TcpOnOneHostPricesTheCollectivesFromItsOwnTablesByRankCount) {
  Cluster c = host();
  const double n = 1048576.0;
  const sim::Group four{4, 1};
  const double formula = sim::allreduce_s(over_fabric(c, "tcp", 1, 0), four, n, 4);
  c.intra_sizes.allreduce_by_ranks[4] = {{65536.0, 1e-6}, {n, 2e-6}};  // shared memory's: not tcp's
  c.intra_sizes.reducescatter_by_ranks[4] = {{65536.0, 1e-6}, {n, 2e-6}};
  EXPECT_DOUBLE_EQ(sim::allreduce_s(over_fabric(c, "tcp", 1, 0), four, n, 4), formula);
  c.inter_sizes.allreduce_by_ranks[4] = {{65536.0, 2e-4}, {n, 7.4e-4}};
  c.inter_sizes.reducescatter_by_ranks[4] = {{65536.0, 1e-4}, {n, 3.3e-4}};
  c.inter_sizes.allgather_by_ranks[4] = {{65536.0, 1e-4}, {n, 3.5e-4}};
  const Cluster tcp = over_fabric(c, "tcp", 1, 0);
  EXPECT_NEAR(sim::allreduce_s(tcp, four, n, 4), 7.4e-4, 1e-12);
  EXPECT_NEAR(sim::reduce_scatter_s(tcp, four, n, 4), 3.3e-4, 1e-12);
  EXPECT_NEAR(sim::allgather_s(tcp, four, n, 4), 3.5e-4, 1e-12);
  EXPECT_NE(formula, 7.4e-4);
  // Between the points, log-log as every table; at a count not timed, the formula as before.
  EXPECT_GT(sim::allreduce_s(tcp, four, n / 2, 4), 2e-4);
  EXPECT_LT(sim::allreduce_s(tcp, four, n / 2, 4), 7.4e-4);
  EXPECT_DOUBLE_EQ(sim::allreduce_s(tcp, sim::Group{8, 1}, n, 8), sim::allreduce_s(over_fabric(host(), "tcp", 1, 0),
                                                                                     sim::Group{8, 1}, n, 8));
  // Shared memory keeps its own.
  EXPECT_NEAR(sim::allreduce_s(c, four, n, 4), 2e-6, 1e-15);
  // The tables round-trip through a calibration file's links_by_size.inter.
  const LinkSizes back = link_sizes_from_json(link_sizes_json(c.inter_sizes), "test");
  EXPECT_EQ(back.allreduce_by_ranks, c.inter_sizes.allreduce_by_ranks);
  EXPECT_EQ(back.allgather_by_ranks, c.inter_sizes.allgather_by_ranks);
}

// Over tcp every receive of gossip and the parameter server is posted before its message can
// come: with more ranks than cores no model waits in the transport's buffers more than with a
// core each (simulate_data_parallel.cc; it was charged one until the 2026-12-04 validations).
TEST(Fabric, RanksBeyondTheCoresOverTcpKeepNoMessageMore) {
  Cluster wide = host();
  wide.cores_per_node = 4;
  for (const char* s : {"gossip", "ps"}) {
    Layout g;
    g.strategy = s;
    g.dp = 4;
    g.ps_sync = true;
    const double beyond = simulate(mlp(), g, over_fabric(host(), "tcp", 1, 0), 64).memory_b();
    const double fits = simulate(mlp(), g, over_fabric(wide, "tcp", 1, 0), 64).memory_b();
    EXPECT_NEAR(beyond, fits, 1.0) << s;
  }
}

// Over tcp with more ranks than cores a message waits in the socket until its reader is
// switched in, and costs the node's CPU at the rate of the calibrated tcp all-reduce at that
// rank count (sim_costs.h tcp_message_cpu_s_per_byte), not at the 2-rank exchange's: gossip
// and the parameter server's workers pay their messages at it in the node's floor.
TEST(Fabric, RanksSharingACoreOverTcpPayEachMessageAtTheAllReducesRate) {
  const double n = 1048576.0, model = 235146 * 4.0;
  Cluster c = host();
  c.gemm_flops = 1e12;  // the step's compute small beside its messages
  c.inter_sizes.allreduce_by_ranks[4] = {{65536.0, 4e-4}, {n, 6e-3}};
  const Cluster tcp = over_fabric(c, "tcp", 1, 0);
  // The all-reduce's 6 ms on both cores over its messages: 4 ranks sending 3/2 MiB each
  // (element-wise work is free in this cluster, so no sums come off).
  EXPECT_NEAR(sim::tcp_message_cpu_s_per_byte(tcp, 4, n), 6e-3 * 2 / (2 * 3 * n), 1e-15);
  const double m = sim::tcp_message_cpu_s_per_byte(tcp, 4, model);
  EXPECT_NEAR(m, tcp.measured_allreduce_s(4, model) * 2 / (2 * 3 * model), 1e-15);
  // Not where it does not apply: shared memory, a core per rank, no table at that count.
  EXPECT_LT(sim::tcp_message_cpu_s_per_byte(c, 4, n), 0);
  EXPECT_LT(sim::tcp_message_cpu_s_per_byte(tcp, 2, n), 0);
  EXPECT_LT(sim::tcp_message_cpu_s_per_byte(over_fabric(host(), "tcp", 1, 0), 4, n), 0);
  Layout gossip;
  gossip.strategy = "gossip";
  gossip.dp = 4;
  Layout ps;
  ps.strategy = "ps";
  ps.dp = 4;
  ps.servers = 1;
  ps.ps_sync = true;
  // gossip: 4 ranks x 2 neighbours' messages; ps: 3 workers' pushes and pulls; on 2 cores.
  EXPECT_GE(simulate(mlp(), gossip, tcp, 64).step_s, 4 * 2 * model * m / 2);
  EXPECT_GE(simulate(mlp(), ps, tcp, 64).step_s, 3 * 2 * model * m / 2);
  Cluster untimed_host = host();
  untimed_host.gemm_flops = 1e12;
  const Cluster untimed = over_fabric(untimed_host, "tcp", 1, 0);
  EXPECT_GT(simulate(mlp(), gossip, tcp, 64).step_s, simulate(mlp(), gossip, untimed, 64).step_s);
  // Two ranks, a core each: the exchange's own price, the table at 4 ranks unused.
  gossip.dp = 2;
  EXPECT_DOUBLE_EQ(simulate(mlp(), gossip, tcp, 64).step_s, simulate(mlp(), gossip, untimed, 64).step_s);
}

// Over tcp the ring reduces in place through a scratch window of one chunk, 1/N of the call,
// and on ranks that fit the cores no chunk comes early (the transport leaves early payloads in
// the kernel): Local SGD at 2 ranks keeps the epoch's order and half a model; at 4 the ring's
// receive buffer and a quarter of a model. fedavg keeps its own two copies and the chunk.
TEST(Fabric, TheRingOverTcpKeepsOneChunkWhereTheRanksFitTheCores) {
  Cluster four_cores = host();
  four_cores.cores_per_node = 4;
  const Cluster tcp = over_fabric(four_cores, "tcp", 1, 0);
  const double model = 235146 * 4.0;
  Layout l;
  l.strategy = "localsgd";
  l.dp = 2;
  l.train_rows = 1000;
  const double two = simulate(mlp(), l, tcp, 64).buffers_b;
  EXPECT_NEAR(two, 8.0 * 1000 + model / 2, 1.0);
  l.dp = 4;
  EXPECT_NEAR(simulate(mlp(), l, tcp, 64).buffers_b, 8.0 * 1000 + 1.25 * model, 1.0);
  l.strategy = "ddp";
  l.dp = 2;
  EXPECT_NEAR(simulate(mlp(), l, tcp, 64).buffers_b, 8.0 * 1000 + model / 2, 1.0);
  l.strategy = "fedavg";
  EXPECT_NEAR(simulate(mlp(), l, tcp, 64).buffers_b, 2 * 8.0 * 1000 + 2.5 * model, 1.0);
}

// Beyond the cores a sleeping wait reads every stream, so chunks come early: half a model per
// extra rank on a core for ddp, a third for Local SGD and fedavg, never more than the ring's
// worst case 2(N-1)/N. ddp's ZeRO over tcp keeps 1.5 copies more wherever its ranks run.
TEST(Fabric, RanksSharingACoreOverTcpKeepEarlyChunksUpToTheWorstCase) {
  Cluster wide = host();
  wide.cores_per_node = 16;
  const Cluster tcp = over_fabric(host(), "tcp", 1, 0), tcp16 = over_fabric(wide, "tcp", 1, 0);
  const double model = 235146 * 4.0;
  auto extra = [&](const char* s, int n, int zero = 0) {
    Layout l;
    l.strategy = s;
    l.dp = n;
    l.zero = zero;
    l.train_rows = 1000;
    return (simulate(mlp(), l, tcp, 64).buffers_b - simulate(mlp(), l, tcp16, 64).buffers_b) / model;
  };
  EXPECT_NEAR(extra("ddp", 4), 0.5, 1e-6);       // 2 ranks a core
  EXPECT_NEAR(extra("ddp", 8), 1.5, 1e-6);       // 4 a core
  EXPECT_NEAR(extra("ddp", 16), 1.875, 1e-6);    // 8 a core: 3.5, capped at 2 x 15/16
  EXPECT_NEAR(extra("localsgd", 4), 1.0 / 3, 1e-6);
  EXPECT_NEAR(extra("localsgd", 8), 1.0, 1e-6);
  EXPECT_NEAR(extra("fedavg", 8), 1.0, 1e-6);
  EXPECT_NEAR(extra("ddp", 4, 1), 0.5, 1e-6);    // ZeRO's copies are the same either way
  Layout l;
  l.strategy = "ddp";
  l.dp = 4;
  l.train_rows = 1000;
  const double plain = simulate(mlp(), l, tcp, 64).buffers_b;
  l.zero = 2;
  EXPECT_NEAR(simulate(mlp(), l, tcp, 64).buffers_b - plain, 1.5 * model, 1.0);
}

// A parameter server over tcp takes its W workers' pushes and sends their replies one after
// another, each a one-way transfer of its slice: 2W of them bound the step's communication.
TEST(Fabric, TheServerMovesEachPushAndReplyInTurn) {
  // A one-way send at a fifth of the exchange's time per byte, so the two prices differ.
  Cluster fast_sends = host();
  fast_sends.inter_sizes.send.clear();
  for (double b : {65536.0, 1048576.0, 16777216.0}) fast_sends.inter_sizes.send.push_back({b, 1e-5 + b * 0.2e-9});
  const Cluster tcp = over_fabric(fast_sends, "tcp", 1, 0);
  const double model = 235146 * 4.0;
  const double one_way = 1e-5 + model * 0.2e-9;
  Layout ps;
  ps.strategy = "ps";
  ps.dp = 4;
  ps.servers = 1;
  ps.ps_sync = true;
  const Prediction p = simulate(mlp(), ps, tcp, 64);
  EXPECT_GE(p.comm_s, 2 * 3 * one_way * 0.999);
  EXPECT_LE(p.comm_s, 2 * 3 * one_way * 1.2);  // the refill of ranks sharing a core on top
  ps.dp = 2;  // one worker: its push and reply, as the worker sees them
  EXPECT_NEAR(simulate(mlp(), ps, tcp, 64).comm_s, 2 * one_way, 0.2 * one_way);
}

TEST(Fabric, AOneWaySendTakesItsOwnTableWhereTheLinkHasOne) {
  const Cluster tcp = over_fabric(host(), "tcp", 1, 0);
  const double b = 1048576.0;
  const double two_way = tcp.link_at(false, b, true).beta_s_per_byte;
  const double one_way = tcp.link_at(false, b, true, true).beta_s_per_byte;
  EXPECT_NEAR(two_way, 1e-9, 1e-12);
  EXPECT_NEAR(one_way, 0.5e-9, 1e-12);
  // Shared memory times no one-way table: a send takes the exchange's figure.
  Cluster shm = host();
  shm.intra_sizes = shm.inter_sizes;
  shm.intra_sizes.send.clear();
  EXPECT_DOUBLE_EQ(shm.link_at(false, b, true, true).beta_s_per_byte, shm.link_at(false, b, true).beta_s_per_byte);
  // ps's push and pull are each one way.
  Layout ps;
  ps.strategy = "ps";
  ps.dp = 2;
  ps.ps_sync = true;
  Cluster halved = tcp;
  for (auto& [bytes, s] : halved.intra_sizes.send) s = 1e-5 + bytes * 0.25e-9;
  EXPECT_LT(simulate(mlp(), ps, halved, 64).comm_s, simulate(mlp(), ps, tcp, 64).comm_s);
}

TEST(Fabric, AcrossHostsTheLinkBetweenThemIsTheCalibratedOne) {
  Cluster c = host();
  const Cluster two = over_fabric(c, "tcp", 2, 1);
  EXPECT_EQ(two.nodes, 2);
  EXPECT_EQ(two.ranks_per_node, 1);
  EXPECT_DOUBLE_EQ(two.inter.beta_s_per_byte, 1e-8);
  EXPECT_NE(two.source.find("the link between them calibrated"), std::string::npos) << two.source;
  const Prediction one_host = simulate(mlp(), ddp(2), over_fabric(c, "tcp", 1, 0), 64);
  const Prediction hosts = simulate(mlp(), ddp(2), two, 64);
  EXPECT_GT(hosts.comm_s, 5 * one_host.comm_s);
  // A tensor-parallel pair split across the hosts pays their link at every block (a slow one
  // here: 1 MB/s, against compute at 1 GFLOP/s).
  Cluster slow = c;
  slow.hosts_link.beta_s_per_byte = 1e-6;
  // Its blocks timed in place on this host's shared memory: their excess over the formula is
  // worked out against that memory's all-reduces, not the hosts' link (which would read the
  // timed block as nearly free of it).
  TpBlockFigure fig;
  fig.heads = 4, fig.width = 64, fig.context = 32, fig.tp = 2, fig.ranks = 2;
  fig.points = {{8, 0.01, 0.02}};
  slow.tp_blocks.push_back(fig);
  Layout tp;
  tp.strategy = "tp";
  tp.tp = 2;
  const ModelSpec gpt = ModelSpec::parse(testing::kGpt);
  EXPECT_GT(simulate(gpt, tp, over_fabric(slow, "tcp", 2, 1), 8).step_s,
            1.5 * simulate(gpt, tp, over_fabric(slow, "tcp", 1, 0), 8).step_s);
  // Without a calibration across hosts, the link is this host's loopback tcp, and it says so.
  c.hosts_calibrated = false;
  const Cluster guessed = over_fabric(c, "tcp", 2, 1);
  EXPECT_DOUBLE_EQ(guessed.inter.beta_s_per_byte, c.inter.beta_s_per_byte);
  EXPECT_NE(guessed.source.find("no calibration across hosts"), std::string::npos) << guessed.source;
}

// Two hosts of two ranks: the executors take the hosts' hierarchy (coll/hierarchical.h), so the
// all-reduce is a reduce-scatter and an all-gather on the host's shared memory around the
// half-size blocks' all-reduce across the hosts, both flows on the host's one link; the
// reduce-scatter and all-gather likewise. A flat ring on that link costs more.
TEST(Fabric, AcrossHostsOfSeveralRanksTheCollectivesAreTheHierarchy) {
  const Cluster c = host();
  const Cluster two = over_fabric(c, "tcp", 2, 2);
  ASSERT_TRUE(two.timed_on);
  const double n = 1 << 20;
  CostParams shared = two.link_at(true, n / 2, false);
  shared.beta_s_per_byte *= 2;
  const CostParams shm = two.timed_on->link_at(false, n, false);
  const sim::Group all{4, 1};
  EXPECT_DOUBLE_EQ(sim::allreduce_s(two, all, n, 2), hierarchical_allreduce_s(2, 2, n, shm, shared));
  EXPECT_LT(sim::allreduce_s(two, all, n, 2), best_allreduce_s(4, n, two.link_at(true, n, false)));
  EXPECT_DOUBLE_EQ(sim::reduce_scatter_s(two, all, n, 2), ring_reduce_scatter_s(2, n, shm) + ring_reduce_scatter_s(2, n / 2, shared));
  EXPECT_DOUBLE_EQ(sim::allgather_s(two, all, n, 2), ring_allgather_s(2, n, shm) + ring_allgather_s(2, n / 2, shared));
  // A rank a host: one flat collective across them, as before.
  const Cluster ones = over_fabric(c, "tcp", 2, 1);
  EXPECT_DOUBLE_EQ(sim::allreduce_s(ones, sim::Group{2, 1}, n, 1), best_allreduce_s(2, n, ones.link_at(true, n, false)));
}

TEST(Fabric, TheHostsTableRoundTripsThroughACalibrationFile) {
  LinkSizes t;
  t.p = 2;
  t.allreduce = {{65536, 1e-3}};
  t.exchange = {{65536, 1e-3}};
  t.send = {{65536, 6e-4}, {1048576, 9e-3}};
  const LinkSizes back = link_sizes_from_json(link_sizes_json(t), "test");
  EXPECT_EQ(back.send, t.send);
  nlohmann::json bad = link_sizes_json(t);
  bad["send"] = nlohmann::json::array({nlohmann::json::array({1048576, 1e-3}), nlohmann::json::array({65536, 1e-3})});
  EXPECT_THROW(link_sizes_from_json(bad, "test"), InvalidArgument);
}

}  // namespace
}  // namespace dtrain::plan
