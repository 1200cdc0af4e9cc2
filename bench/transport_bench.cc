// Google Benchmark: the transport's own costs, ranks as two threads in one process.
//   BM_PingPong/shm|tcp/BYTES   one round trip (time per iteration = 2 x one-way latency)
//   BM_Copy/HOW/BYTES/SRC/DST   one copy of BYTES from a page + SRC to a page + DST, with
//                               memcpy (HOW 0) or base/copy.h's copy_memory (HOW 1): where
//                               DST - SRC is 1-31 memcpy's `rep movsb` crawls on AMD Zen 3
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "base/copy.h"
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
void BM_Copy(benchmark::State& state) {
  const bool ours = state.range(0) != 0;
  const auto bytes = static_cast<size_t>(state.range(1));
  const auto src_off = static_cast<size_t>(state.range(2)), dst_off = static_cast<size_t>(state.range(3));
  // Both buffers start on a page: the offsets are the distance modulo 4 KiB that matters.
  auto page = [&](int fill) {
    char* p = static_cast<char*>(::operator new(bytes + 4096, std::align_val_t{4096}));
    std::memset(p, fill, bytes + 4096);
    return std::unique_ptr<char, void (*)(char*)>(p, [](char* q) { ::operator delete(q, std::align_val_t{4096}); });
  };
  auto a = page(1), b = page(2);
  for (auto _ : state) {
    if (ours)
      copy_memory(b.get() + dst_off, a.get() + src_off, bytes);
    else
      std::memcpy(b.get() + dst_off, a.get() + src_off, bytes);
    benchmark::DoNotOptimize(b.get());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_Copy)
    ->ArgNames({"ours", "bytes", "src", "dst"})
    ->ArgsProduct({{0, 1}, {4096, 65536, 1 << 20}, {0, 16}, {0, 16, 48}});

BENCHMARK(BM_PingPongShm)->Arg(8)->Arg(4096)->Arg(1 << 20)->UseRealTime();
BENCHMARK(BM_PingPongTcp)->Arg(8)->Arg(4096)->Arg(1 << 20)->UseRealTime();

}  // namespace
}  // namespace dtrain

BENCHMARK_MAIN();
