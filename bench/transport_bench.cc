// Google Benchmark: the transport's own costs, ranks as two threads in one process.
//   BM_PingPong/shm|tcp/BYTES   one round trip (time per iteration = 2 x one-way latency)
#include <benchmark/benchmark.h>

#include <atomic>
#include <thread>
#include <vector>

#include "coll/communicator.h"

namespace dtrain {
namespace {

void ping_pong(benchmark::State& state, TransportKind kind) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  auto store = std::make_shared<MemoryStore>(30);
  TransportOptions opts;
  opts.kind = kind;
  opts.timeout_s = 30;
  opts.fabric.token = "bench";
    // The first byte of the message says whether to go on (1) or stop (0).
  std::vector<char> a(bytes, 1), b(bytes);
  std::thread peer([&] {
    Communicator c(store, 1, 2, opts);
    for (;;) {
      c.recv(0, b.data(), bytes, 2);
      if (!b[0]) break;
      c.send(0, b.data(), bytes, 3);
    }
  });
  Communicator c(store, 0, 2, opts);
  for (auto _ : state) {
    c.send(1, a.data(), bytes, 2);
    c.recv(1, a.data(), bytes, 3);
  }
  a[0] = 0;
  c.send(1, a.data(), bytes, 2);
  peer.join();
}

void BM_PingPongShm(benchmark::State& s) { ping_pong(s, TransportKind::kShm); }
void BM_PingPongTcp(benchmark::State& s) { ping_pong(s, TransportKind::kTcp); }
BENCHMARK(BM_PingPongShm)->Arg(8)->Arg(4096)->Arg(1 << 20)->UseRealTime();
BENCHMARK(BM_PingPongTcp)->Arg(8)->Arg(4096)->Arg(1 << 20)->UseRealTime();

}  // namespace
}  // namespace dtrain

BENCHMARK_MAIN();
