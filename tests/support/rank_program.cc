// dtrain_test_rank — a tiny rank program the multi-process tests start through `dtrain run`.
//
//   exchange N      every rank sends N bytes to every other rank and checks what it got;
//                   rank 0 prints "exchange ok WORLD TRANSPORT"
//   die-mid-transfer  rank 1 exits with status 0 in the middle of a 256 MiB transfer (without
//                   closing anything); rank 0 must see PeerFailure naming rank 1, prints
//                   "survivor saw: <what>" and exits 3
//   barrier-split   barrier, split into even/odd groups, exchange inside them
//   die-in-setup    rank 2 fails before it joins (the others are left waiting in the
//                   transport's rendezvous until the launcher stops them)
//   die-in-shmctx   every rank joins; rank 2 fails before the collectives' shared-memory
//                   context (the others wait inside its setup until stopped)
//   witness-alone   rank 1 reports a peer failure that never happened and exits 4; the
//                   launcher must still blame it (after its grace) and stop the others
//   witness-race    rank 2 exits 5 and rank 0, seeing it gone, exits 1, both while rank 3
//                   holds the launcher stopped (SIGSTOP): the launcher then reaps the two
//                   together and must blame rank 2, the culprit, not rank 0, the witness
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "coll/communicator.h"
#include "coll/shm_context.h"
#include "comm/heartbeat.h"
#include "comm/store.h"
#include "support/world.h"

using namespace dtrain;

static int exchange(Communicator& c, size_t bytes) {
  int n = c.size();
  std::vector<std::vector<unsigned char>> out(n), in(n);
  std::vector<Request> reqs;
  for (int p = 0; p < n; ++p) {
    out[p].resize(bytes);
    in[p].assign(bytes, 0);
    for (size_t i = 0; i < bytes; ++i) out[p][i] = testing::pattern_byte(c.rank(), p, 1, i);
    reqs.push_back(c.irecv(p, in[p].data(), bytes, 1));
    reqs.push_back(c.isend(p, out[p].data(), bytes, 1));
  }
  Transport::wait_all(reqs);
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < bytes; ++i)
      if (in[p][i] != testing::pattern_byte(p, c.rank(), 1, i)) {
        std::fprintf(stderr, "rank %d: wrong byte %zu from rank %d\n", c.rank(), i, p);
        return 1;
      }
  c.barrier();
  if (c.rank() == 0) std::printf("exchange ok %d %s\n", n, c.transport().kind());
  return 0;
}

// The state letter of /proc/PID/stat ('Z' zombie, 'T' stopped; '?' once the process is gone).
static char process_state(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return '?';
  auto paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() ? '?' : line[paren + 2];
}

// Polls until every pid's state is one of `states`, for at most 30 s; says whether it got there.
static bool await_states(const std::vector<long>& pids, const std::string& states) {
  for (int i = 0; i < 30000; ++i) {
    bool all = true;
    for (long pid : pids) all = all && states.find(process_state(pid)) != std::string::npos;
    if (all) return true;
    ::usleep(1000);
  }
  return false;
}

static int witness_race(Communicator& c) {
  // Ranks 0 and 2 tell rank 3 their pids while the launcher (which also serves the store) runs.
  long me = ::getpid(), pid0 = 0, pid2 = 0;
  if (c.rank() == 0 || c.rank() == 2) c.send(3, &me, sizeof me, 10);
  if (c.rank() == 3) {
    c.recv(0, &pid0, sizeof pid0, 10);
    c.recv(2, &pid2, sizeof pid2, 10);
  }
  c.barrier();
  const long launcher = ::getppid();
  char go = 1;
  switch (c.rank()) {
    case 3: {
      ::kill(static_cast<pid_t>(launcher), SIGSTOP);
      if (!await_states({launcher}, "T")) std::fprintf(stderr, "rank 3: the launcher did not stop\n");
      c.send(2, &go, 1, 11);
      if (!await_states({pid0, pid2}, "Z?")) std::fprintf(stderr, "rank 3: ranks 0 and 2 did not both exit\n");
      ::kill(static_cast<pid_t>(launcher), SIGCONT);
      c.recv(1, &go, 1, 12);  // never sent: the launcher stops this rank
      return 0;
    }
    case 2:
      c.recv(3, &go, 1, 11);
      std::fprintf(stderr, "rank 2 fails while the launcher is stopped\n");
      std::fflush(stderr);
      ::_exit(5);
    case 0:
      try {
        c.recv(2, &go, 1, 13);  // never sent: rank 2 dies
      } catch (const PeerFailure& e) {
        std::fprintf(stderr, "rank 0 saw rank %d fail\n", e.peer());
        std::fflush(stderr);
        ::_exit(1);  // at once: the launcher is stopped, so no goodbye through its store
      }
      return 0;
    default:
      c.recv(3, &go, 1, 12);  // never sent: the launcher stops this rank
      return 0;
  }
}

int main(int argc, char** argv) {
  std::string what = argc > 1 ? argv[1] : "exchange";
  const char* env_rank = std::getenv("RANK");
  const bool rank2 = env_rank && std::string(env_rank) == "2";
  if (what == "die-in-setup" && rank2) {
    // Fails once every other rank has published its shared-memory segment (they are then
    // waiting for rank 2's inside the transport's rendezvous).
    try {
      auto store = open_store(std::getenv("DTRAIN_STORE"), std::getenv("DTRAIN_TOKEN"), 30);
      store->wait({"world/transport/shm/0", "world/transport/shm/1", "world/transport/shm/3"}, 30);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank 2: %s\n", e.what());
    }
    std::fprintf(stderr, "rank 2 fails during setup\n");
    return 5;
  }
  try {
    auto comm = Communicator::from_env();
    Communicator& c = *comm;
    if (what == "exchange") return exchange(c, argc > 2 ? std::stoul(argv[2]) : 100000);
    if (what == "die-mid-transfer") {
      const size_t bytes = 256u << 20;
      std::vector<char> buf(bytes, 7);
      c.barrier();
      if (c.rank() == 1) {
        // Take in part of the message (a bounded number of progress passes while rank 0 is
        // sending), then vanish without closing anything.
        Request r = c.irecv(0, buf.data(), bytes, 2);
        for (int i = 0; i < 2000 && !r.test(); ++i) {
        }
        std::fflush(stdout);
        ::_exit(0);
      }
      try {
        c.send(1, buf.data(), bytes, 2);
        std::vector<char> more(16);
        c.recv(1, more.data(), more.size(), 3);
        std::printf("survivor saw nothing\n");
        return 0;
      } catch (const PeerFailure& e) {
        std::printf("survivor saw: peer=%d %s\n", e.peer(), e.what());
        std::fflush(stdout);
        return 3;
      }
    }
    if (what == "barrier-split") {
      c.barrier();
      auto sub = c.split(c.rank() % 2, c.rank());
      int rc = exchange(*sub, 1000);
      c.barrier();
      return rc;
    }
    if (what == "witness-race") return witness_race(c);
    if (what == "witness-alone") {
      // Rank 1 says it saw a peer fail, though none did, and exits 4; ranks 0 and 2 wait for
      // each other's message, which nobody sends. With no culprit to find, the launcher
      // blames rank 1 after its grace and stops the others.
      c.barrier();
      if (c.rank() == 1) {
        tell_launcher_a_peer_failed();
        std::fprintf(stderr, "rank 1 leaves as a witness\n");
        std::fflush(stderr);
        ::_exit(4);
      }
      char go = 0;
      c.recv(c.rank() == 0 ? 2 : 0, &go, 1, 14);  // never sent, and not from rank 1: they live on
      return 0;
    }
    if (what == "die-in-setup") return exchange(c, 1000);  // not reached while rank 2 is missing
    if (what == "die-in-shmctx") {
      c.barrier();
      if (rank2) {
        // Fails once the others are inside the context's setup (their segments published
        // under the sequence number the context draws next).
        std::string key = "shmctx/" + std::to_string(c.next_sequence()) + "/";
        c.store().wait({key + "0", key + "1", key + "3"}, 30);
        std::fprintf(stderr, "rank 2 fails before the shared-memory context\n");
        std::fflush(stderr);
        ::_exit(5);
      }
      ShmContext ctx(c);
      return 0;
    }
    std::fprintf(stderr, "unknown scenario %s\n", what.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank error: %s\n", e.what());
    return 1;
  }
}
