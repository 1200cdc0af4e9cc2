// The TCP store against hostile and careless clients (issue 13, item 1): memory before login,
// login deadline, connection cap, descriptors running out, and wrong requests after login.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "comm/socket.h"
#include "comm/store.h"
#include "comm/tcp_store.h"
#include "comm/tcp_store_protocol.h"

namespace dtrain {
namespace {
namespace sp = store_protocol;

Fd raw_connect(int port) { return connect_tcp("127.0.0.1", port, Deadline::after(10)); }

// Reads one answer frame; "" + *closed when the server closed instead. Bounded by 10 s: a
// server that neither answers nor closes fails the test with a Timeout.
// `fields`, where given, receives every field of the answer.
std::string read_answer(int fd, uint8_t* op, bool* closed, std::vector<std::string>* fields = nullptr) {
  *closed = false;
  uint32_t n = 0;
  try {
    read_full(fd, &n, 4, Deadline::after(10), "test client");
  } catch (const Timeout&) {
    throw;
  } catch (const IoError&) {
    *closed = true;
    return "";
  }
  EXPECT_LE(n, 1u << 20);
  std::string body(n, '\0');
  read_full(fd, body.data(), n, Deadline::after(10), "test client");
  std::vector<std::string> f;
  *op = sp::decode(body, &f);
  if (fields) *fields = f;
  return f.empty() ? "" : f[0];
}

// After an ERR the server closes: the next read sees EOF (not a timeout).
bool closed_by_server(int fd) {
  char c;
  try {
    read_full(fd, &c, 1, Deadline::after(10), "test client");
  } catch (const Timeout&) {
    return false;
  } catch (const IoError&) {
    return true;
  }
  return false;
}

TEST(StoreHostile, BigFrameBeforeLoginIsRefusedAtItsLength) {
  TcpStoreServer server("127.0.0.1", 0, "secret");
  Fd fd = raw_connect(server.port());
  uint32_t n = 64u << 20;  // announces 64 MiB, sends only the length
  write_full(fd.get(), &n, 4, Deadline::after(10), "test");
  uint8_t op = 0;
  bool closed = false;
  std::string why = read_answer(fd.get(), &op, &closed);
  ASSERT_FALSE(closed);
  EXPECT_EQ(op, sp::kErr);
  EXPECT_NE(why.find("before login"), std::string::npos) << why;
  EXPECT_TRUE(closed_by_server(fd.get()));
  // A real client still gets in.
  TcpStore ok("127.0.0.1", server.port(), "secret", 10);
  ok.set("k", "v");
  EXPECT_EQ(ok.get("k"), "v");
}

TEST(StoreHostile, SilentConnectionIsClosedAtTheLoginDeadline) {
  StoreLimits limits;
  limits.login_timeout_s = 0.2;
  TcpStoreServer server("127.0.0.1", 0, "secret", limits);
  Fd fd = raw_connect(server.port());
  uint8_t op = 0;
  bool closed = false;
  std::string why = read_answer(fd.get(), &op, &closed);  // nothing sent: the server must act
  ASSERT_FALSE(closed);
  EXPECT_EQ(op, sp::kErr);
  EXPECT_NE(why.find("no valid HELLO"), std::string::npos) << why;
  EXPECT_TRUE(closed_by_server(fd.get()));
}

TEST(StoreHostile, ConnectionsPastTheCapAreRefusedNotQueued) {
  StoreLimits limits;
  limits.max_clients = 4;
  TcpStoreServer server("127.0.0.1", 0, "secret", limits);
  std::vector<std::unique_ptr<TcpStore>> ranks;
  for (int i = 0; i < 4; ++i) ranks.push_back(std::make_unique<TcpStore>("127.0.0.1", server.port(), "secret", 10));
  Fd extra = raw_connect(server.port());
  uint8_t op = 0;
  bool closed = false;
  std::vector<std::string> fields;
  std::string why = read_answer(extra.get(), &op, &closed, &fields);
  ASSERT_FALSE(closed);
  EXPECT_EQ(op, sp::kErr);
  EXPECT_NE(why.find("busy"), std::string::npos) << why;
  ASSERT_EQ(fields.size(), 2u);  // marked: a refusal for now, which a client may retry
  EXPECT_EQ(fields[1], sp::kRetryLater);
  // A client tries again until its timeout, then says why it could not get in.
  try {
    TcpStore("127.0.0.1", server.port(), "secret", 0.3);
    ADD_FAILURE() << "a fifth client must not get in while four hold the cap";
  } catch (const IoError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("busy"), std::string::npos) << what;
    EXPECT_NE(what.find("attempts within the 0.3 s timeout"), std::string::npos) << what;
  }
  ranks[0]->set("still", "served");
  EXPECT_EQ(ranks[3]->get("still"), "served");
  ranks.pop_back();  // a slot frees: the next client is admitted (its retries span the close)
  TcpStore again("127.0.0.1", server.port(), "secret", 10);
  EXPECT_EQ(again.get("still"), "served");
}

// A client that arrives while the server is full waits its turn within its timeout: it is
// refused for now, keeps trying, and gets in once a slot frees.
TEST(StoreHostile, ClientRefusedForNowGetsInWhenASlotFrees) {
  StoreLimits limits;
  limits.max_clients = 1;
  TcpStoreServer server("127.0.0.1", 0, "secret", limits);
  auto holder = std::make_unique<TcpStore>("127.0.0.1", server.port(), "secret", 10);
  holder->set("k", "v");
  std::string got, error;
  std::thread late([&] {
    try {
      TcpStore rank("127.0.0.1", server.port(), "secret", 30);
      got = rank.get("k");
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  // Free the slot only once the late client has been turned away at least once.
  Deadline bound = Deadline::after(30);
  while (server.refused() == 0 && !bound.expired()) std::this_thread::yield();
  EXPECT_GE(server.refused(), 1);
  holder.reset();
  late.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(got, "v");
}

TEST(StoreHostile, SilentCrowdCannotKeepRanksOut) {
  StoreLimits limits;
  limits.max_prelogin_clients = 3;
  TcpStoreServer server("127.0.0.1", 0, "secret", limits);
  std::vector<Fd> crowd;
  for (int i = 0; i < 10; ++i) crowd.push_back(raw_connect(server.port()));
  TcpStore rank("127.0.0.1", server.port(), "secret", 10);  // evicts the oldest silent one
  rank.set("a", "1");
  EXPECT_EQ(rank.get("a"), "1");
  EXPECT_TRUE(closed_by_server(crowd[0].get()));
}

// The server process runs short of descriptors: connections past that are answered and
// closed (they would sit in the backlog, and the accept loop spin, without the spare fd).
TEST(StoreHostile, OutOfDescriptorsRefusesGracefully) {
#if defined(__SANITIZE_ADDRESS__)
  // scripts/sanitize.sh builds ASan with UBSan, whose vptr check probes memory through a pipe:
  // with the descriptors used up it cannot, reports "invalid vptr" inside the server's
  // ostringstream and aborts the server (2026-11-28). The sanitizers need descriptors this
  // test takes away; the plain build runs it.
  GTEST_SKIP() << "the sanitizer runtime needs file descriptors this test exhausts";
#endif
  int port_pipe[2], go_pipe[2];
  ASSERT_EQ(::pipe(port_pipe), 0);
  ASSERT_EQ(::pipe(go_pipe), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(port_pipe[0]);
    ::close(go_pipe[1]);  // so a parent that dies is an EOF here, not a hang
    int code = 0;
    {
      TcpStoreServer server("127.0.0.1", 0, "secret");
      // Use up the descriptors below a low limit, the way a busy launcher would.
      rlimit rl{64, 64};
      ::setrlimit(RLIMIT_NOFILE, &rl);
      std::vector<int> hog;
      for (int fd; (fd = ::open("/dev/null", O_RDONLY)) >= 0;) hog.push_back(fd);
      for (int i = 0; i < 2 && !hog.empty(); ++i) {  // room for two connections
        ::close(hog.back());
        hog.pop_back();
      }
      int port = server.port();
      if (::write(port_pipe[1], &port, sizeof port) != sizeof port) code = 2;
      char c;
      if (::read(go_pipe[0], &c, 1) != 1) code = 3;  // parent: done connecting
      for (int fd : hog) ::close(fd);
      if (::write(port_pipe[1], "f", 1) != 1) code = 5;  // descriptors freed
      if (::read(go_pipe[0], &c, 1) != 1) code = 4;  // parent: done checking
    }
    ::_exit(code);
  }
  ::close(port_pipe[1]);
  ::close(go_pipe[0]);
  int port = 0;
  ASSERT_EQ(::read(port_pipe[0], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  std::vector<Fd> conns;
  int refused = 0;
  for (int i = 0; i < 8; ++i) conns.push_back(raw_connect(port));
  std::string seen;
  for (int i = 2; i < 8; ++i) {  // the first two fit; the others must be told, not ignored
    uint8_t op = 0;
    bool closed = false;
    std::vector<std::string> fields;
    std::string why = read_answer(conns[i].get(), &op, &closed, &fields);
    if (!closed && op == sp::kErr && why.find("file descriptors") != std::string::npos &&
        fields.back() == sp::kRetryLater)
      ++refused;
    seen += " [" + std::to_string(i) + (closed ? ": closed" : ": op " + std::to_string(op) + " " + why) + "]";
  }
  // Without the spare descriptor none would be answered (they would wait in the backlog while
  // the accept loop spins). One may find a descriptor another thread of the server just freed.
  EXPECT_GE(refused, 5) << seen;
  conns.clear();
  ASSERT_EQ(::write(go_pipe[1], "g", 1), 1);
  char freed = 0;
  ASSERT_EQ(::read(port_pipe[0], &freed, 1), 1);  // descriptors back: a rank gets in
  {
    TcpStore rank("127.0.0.1", port, "secret", 10);
    rank.set("k", "v");
    EXPECT_EQ(rank.get("k"), "v");
  }
  ASSERT_EQ(::write(go_pipe[1], "g", 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  for (int fd : {port_pipe[0], go_pipe[1]}) ::close(fd);
}

TEST(StoreHostile, WrongRequestsAfterLoginAreAnsweredClearly) {
  TcpStoreServer server("127.0.0.1", 0, "secret");
  TcpStore s("127.0.0.1", server.port(), "secret", 10);
  s.set("word", "abc");
  try {
    s.add("word", 1);
    FAIL() << "add to a non-number must throw";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("not a decimal integer"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("word"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s.add("n", INT64_MAX), INT64_MAX);
  try {
    s.add("n", 1);
    FAIL() << "overflow must throw";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("overflows"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s.get("n"), std::to_string(INT64_MAX));  // unchanged, and the connection still works

  // Raw frames: ADD of a non-number amount, a negative and a NaN GET timeout.
  Fd fd = raw_connect(server.port());
  auto ask = [&](uint8_t op, const std::vector<std::string>& fields, uint8_t* rop) {
    std::string frame = sp::encode(op, fields);
    write_full(fd.get(), frame.data(), frame.size(), Deadline::after(10), "test");
    bool closed = false;
    std::string a = read_answer(fd.get(), rop, &closed);
    EXPECT_FALSE(closed);
    return a;
  };
  uint8_t op = 0;
  ask(sp::kHello, {"secret"}, &op);
  ASSERT_EQ(op, sp::kOk);
  EXPECT_NE(ask(sp::kAdd, {"n2", "12abc"}, &op).find("not a decimal"), std::string::npos);
  EXPECT_EQ(op, sp::kErr);
  EXPECT_NE(ask(sp::kGet, {"missing", "-5"}, &op).find("timeout"), std::string::npos);
  EXPECT_EQ(op, sp::kErr);
  EXPECT_NE(ask(sp::kWait, {"nan", "missing"}, &op).find("timeout"), std::string::npos);
  EXPECT_EQ(op, sp::kErr);
  EXPECT_EQ(ask(sp::kGet, {"word", "0"}, &op), "abc");
  EXPECT_EQ(op, sp::kOk);
}

TEST(StoreHostile, MemoryAndFileStoresGiveTheSameAddErrors) {
  MemoryStore m(5);
  m.set("w", "abc");
  EXPECT_THROW(m.add("w", 1), InvalidArgument);
  m.add("n", INT64_MIN);
  EXPECT_THROW(m.add("n", -1), InvalidArgument);
  EXPECT_EQ(m.get("n"), std::to_string(INT64_MIN));
}

}  // namespace
}  // namespace dtrain
