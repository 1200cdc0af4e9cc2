// dtrain bench p2p — point-to-point latency and bandwidth between ranks 0 and 1.
//
// For each transport asked for, the ranks build a communicator of that kind over the job's
// store and measure, per message size:
//   latency   ping-pong: rank 0 sends, rank 1 sends back; one-way time = round trip / 2
//   bandwidth streaming: rank 0 keeps `window` sends in flight, rank 1 receives them all and
//             answers with one byte; GB/s = bytes moved / time (1 GB = 1e9 bytes)
// Iteration counts are calibrated on rank 0 so each point runs about --seconds, and sent to
// rank 1 first so both loop the same number of times. Ranks other than 0 and 1 wait.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/env.h"
#include "base/error.h"
#include "cli/bench.h"
#include "cli/flags.h"
#include "launch/launch.h"
#include "coll/communicator.h"

namespace dtrain::cli {
namespace {

struct Row {
  std::string transport;
  size_t bytes;
  double latency_us, pingpong_gbps, stream_gbps;
  int64_t iters;
};

std::vector<size_t> parse_sizes(const std::string& spec) {
  auto colon = spec.find(':');
  DT_CHECK(colon != std::string::npos, InvalidArgument, "--sizes expects MIN:MAX (e.g. 1:256M), got '" << spec << "'");
  int64_t lo = parse_size(spec.substr(0, colon), "--sizes"), hi = parse_size(spec.substr(colon + 1), "--sizes");
  DT_CHECK(lo >= 1 && hi >= lo, InvalidArgument, "--sizes " << spec << ": need 1 <= MIN <= MAX");
  std::vector<size_t> out;
  for (int64_t s = lo; s <= hi; s *= 4) out.push_back(static_cast<size_t>(s));
  if (out.back() != static_cast<size_t>(hi)) out.push_back(static_cast<size_t>(hi));
  return out;
}

// One measurement: `iters` rounds of fn on both ranks; returns seconds on rank 0.
template <class Fn>
double timed(Communicator& c, int64_t iters, Fn&& fn) {
  c.barrier();
  double t0 = now_seconds();
  for (int64_t i = 0; i < iters; ++i) fn();
  return now_seconds() - t0;
}

// Rank 0 picks an iteration count so the point takes about `seconds`, and tells rank 1.
template <class Fn>
int64_t calibrate(Communicator& c, double seconds, Fn&& one_round) {
  int64_t iters = 1;
  if (c.rank() == 0) {
    double t = 0;
    while (true) {
      t = timed(c, iters, one_round);
      int64_t go = (t >= seconds / 4 || iters >= (1 << 20)) ? 1 : 0;
      c.send(1, &go, sizeof go, 1);
      if (go) break;
      iters *= 4;
    }
    iters = std::max<int64_t>(3, static_cast<int64_t>(iters * seconds / std::max(t, 1e-9)));
    c.send(1, &iters, sizeof iters, 2);
  } else {
    while (true) {
      timed(c, iters, one_round);
      int64_t go;
      c.recv(0, &go, sizeof go, 1);
      if (go) break;
      iters *= 4;
    }
    c.recv(0, &iters, sizeof iters, 2);
  }
  return iters;
}

std::vector<Row> measure(Communicator& c, const std::vector<size_t>& sizes, double seconds, int window) {
  std::vector<Row> rows;
  size_t max_bytes = sizes.back();
  std::vector<char> buf(max_bytes, 1);
  char ack = 0;
  int peer = 1 - c.rank();
  for (size_t bytes : sizes) {
    Row row{c.transport().kind(), bytes, 0, 0, 0, 0};
    auto pingpong = [&] {
      if (c.rank() == 0) {
        c.send(peer, buf.data(), bytes, 10);
        c.recv(peer, buf.data(), bytes, 11);
      } else {
        c.recv(peer, buf.data(), bytes, 10);
        c.send(peer, buf.data(), bytes, 11);
      }
    };
    int64_t iters = calibrate(c, seconds, pingpong);
    double t = timed(c, iters, pingpong);
    row.latency_us = t / iters / 2 * 1e6;
    row.pingpong_gbps = 2.0 * bytes * iters / t / 1e9;
    int w = bytes >= (8u << 20) ? 2 : window;
    std::vector<Request> reqs(w);
    auto stream = [&] {
      for (int k = 0; k < w; ++k)
        reqs[k] = c.rank() == 0 ? c.isend(peer, buf.data(), bytes, 12) : c.irecv(peer, buf.data(), bytes, 12);
      Transport::wait_all(reqs);
      if (c.rank() == 0) c.recv(peer, &ack, 1, 13);
      else c.send(peer, &ack, 1, 13);
    };
    iters = calibrate(c, seconds, stream);
    t = timed(c, iters, stream);
    row.stream_gbps = static_cast<double>(bytes) * w * iters / t / 1e9;
    row.iters = iters;
    rows.push_back(row);
    if (c.rank() == 0) {
      std::printf("%12zu %14.2f %14.3f %14.3f %10lld\n", bytes, row.latency_us, row.pingpong_gbps, row.stream_gbps,
                  static_cast<long long>(iters));
      std::fflush(stdout);
    }
  }
  return rows;
}

}  // namespace

int bench_p2p(const Args& args) {
  Flags f("bench p2p", args);
  int n = static_cast<int>(f.get_int("nproc", 2, 1, 1024, "ranks to start (only ranks 0 and 1 exchange)", "n"));
  std::string transport = f.get_string("transport", "shm,tcp", "shm, tcp or both (shm,tcp)");
  std::string sizes_spec = f.get_string("sizes", "1:256M", "message sizes MIN:MAX, x4 steps (K, M, G suffixes)");
  double seconds = f.get_double("seconds", 0.2, 1e-4, 3600, "target time per measurement");
  int window = static_cast<int>(f.get_int("window", 8, 1, 4096, "sends in flight when streaming"));
  std::string json = f.get_string("json", "", "write the rows as JSON to FILE");
  double timeout = f.get_double("timeout", 120, 0.1, 1e6, "seconds any blocking call may wait");
  if (f.help_requested()) {
    std::printf("%s", f.help_text("[-n 2] [--transport shm,tcp] [--sizes 1:256M] [--json FILE]").c_str());
    return 0;
  }
  f.finish();
  auto sizes = parse_sizes(sizes_spec);
  std::vector<TransportKind> kinds;
  for (size_t pos = 0; pos <= transport.size();) {
    size_t comma = transport.find(',', pos);
    if (comma == std::string::npos) comma = transport.size();
    TransportKind k = parse_transport_kind(transport.substr(pos, comma - pos));
    DT_CHECK(k != TransportKind::kAuto, InvalidArgument, "--transport: name shm or tcp, not auto");
    kinds.push_back(k);
    pos = comma + 1;
  }
  DT_CHECK(window >= 1, InvalidArgument, "--window must be >= 1");

  if (!launch::inside_launched_rank()) {
    DT_CHECK(n >= 2, InvalidArgument, "bench p2p needs -n 2 or more (got " << n << ")");
    launch::LaunchOptions o;
    o.nproc = n;
    o.timeout_s = timeout;
    o.tag_output = false;
    return launch::relaunch_command(o, {"bench", "p2p"}, args);
  }

  WorldInfo info = world_from_env();
  DT_CHECK(info.size >= 2, InvalidArgument, "bench p2p needs at least 2 ranks");
  std::shared_ptr<void> keepalive;
  auto store = open_world_store(info, &keepalive);
  std::vector<Row> all;
  for (TransportKind kind : kinds) {
    TransportOptions t = info.transport;
    t.kind = kind;
    t.timeout_s = timeout;
    Communicator world(store, info.rank, info.size, t, std::string("p2p-") + transport_kind_name(kind), {},
                       coll_config_from(Settings::process()));
    auto pair = world.split(world.rank() < 2 ? 0 : -1, world.rank());
    if (!pair) {
      world.barrier();
      continue;
    }
    if (pair->rank() == 0) {
      std::printf("# dtrain bench p2p: ranks 0 and 1 of %d, transport %s, %s\n", info.size, transport_kind_name(kind),
                  info.size > 2 ? "others idle" : "");
      std::printf("# latency: ping-pong one-way; bandwidth: %d sends in flight (2 from 8 MiB), GB = 1e9 bytes\n", window);
      std::printf("%12s %14s %14s %14s %10s\n", "size(B)", "latency(us)", "pingpong(GB/s)", "stream(GB/s)", "iters");
    }
    auto rows = measure(*pair, sizes, seconds, window);
    all.insert(all.end(), rows.begin(), rows.end());
    world.barrier();
  }
  if (info.rank == 0 && !json.empty()) {
    nlohmann::json out = nlohmann::json::array();
    for (auto& r : all)
      out.push_back({{"transport", r.transport}, {"world_size", info.size}, {"size_bytes", r.bytes},
                     {"latency_us", r.latency_us}, {"pingpong_gbps", r.pingpong_gbps}, {"bandwidth_gbps", r.stream_gbps},
                     {"iters", r.iters}});
    std::ofstream o(json);
    DT_CHECK(o.good(), IoError, "cannot write --json file " << json);
    o << out.dump(2) << "\n";
  }
  return 0;
}

}  // namespace dtrain::cli
