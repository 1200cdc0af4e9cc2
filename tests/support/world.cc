#include "support/world.h"

#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace dtrain::testing {

void run_world(int n, const WorldOptions& opts, const std::function<void(Communicator&)>& fn) {
  auto store = std::make_shared<MemoryStore>(opts.timeout_s);
  TransportOptions t;
  t.kind = opts.kind;
  t.timeout_s = opts.timeout_s;
  t.fabric.connect_timeout_s = opts.timeout_s;
  t.fabric.shm_ring_bytes = opts.shm_ring_bytes;
  t.fabric.tcp_congestion = opts.tcp_congestion;
  t.ranks_on_host = opts.ranks_on_host;
  t.fabric.token = "test-token";
  std::mutex mu;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        TransportOptions mine = t;
        if (r == opts.fault_rank) mine.decorate_fabric = fault_injector(opts.fault);
        CollConfig coll = opts.coll;
        if (opts.host_of) coll.host_id = opts.host_of(r);
        Communicator comm(store, r, n, mine, "world", {}, coll);
        fn(comm);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& th : threads) th.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace dtrain::testing
