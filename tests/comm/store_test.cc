#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "base/error.h"
#include "comm/file_store.h"
#include "comm/store.h"
#include "comm/tcp_store.h"

namespace dtrain {
namespace {

// Each case runs against every store implementation.
class StoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "memory") {
      make_ = [] { return std::make_shared<MemoryStore>(5); };
    } else if (GetParam() == "file") {
      dir_ = std::filesystem::temp_directory_path() / ("dtrain-store-test-" + std::to_string(::getpid()));
      std::filesystem::remove_all(dir_);
      make_ = [this] { return std::make_shared<FileStore>(dir_.string(), 5); };
    } else {
      server_ = std::make_unique<TcpStoreServer>("127.0.0.1", 0, "secret");
      make_ = [this] { return std::make_shared<TcpStore>("127.0.0.1", server_->port(), "secret", 5); };
    }
    shared_ = make_();
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // A new client of the same store (a "process").
  std::shared_ptr<Store> client() { return GetParam() == "memory" ? shared_ : make_(); }

  std::function<std::shared_ptr<Store>()> make_;
  std::shared_ptr<Store> shared_;
  std::unique_ptr<TcpStoreServer> server_;
  std::filesystem::path dir_;
};

TEST_P(StoreTest, SetGetAddCheckRemove) {
  auto s = client();
  s->set("a", std::string("x\0y", 3));
  EXPECT_EQ(s->get("a"), std::string("x\0y", 3));
  EXPECT_EQ(s->add("n", 5), 5);
  EXPECT_EQ(s->add("n", -2), 3);
  EXPECT_EQ(s->get("n"), "3");
  EXPECT_TRUE(s->check({"a", "n"}));
  EXPECT_FALSE(s->check({"a", "zz"}));
  EXPECT_TRUE(s->remove("a"));
  EXPECT_FALSE(s->remove("a"));
  EXPECT_FALSE(s->check({"a"}));
  std::string big(100000, 'q');
  s->set("big", big);
  EXPECT_EQ(s->get("big"), big);
}

TEST_P(StoreTest, GetWaitsForAnotherClient) {
  auto reader = client();
  std::thread writer([&] {
    auto w = client();
    w->set("later", "v");
  });
  EXPECT_EQ(reader->get("later", 10), "v");
  writer.join();
}

TEST_P(StoreTest, ConcurrentAddIsAtomic) {
  const int threads = 8, per = 50;
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&] {
      auto s = client();
      for (int i = 0; i < per; ++i) s->add("counter", 1);
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(client()->get("counter"), std::to_string(threads * per));
}

TEST_P(StoreTest, WaitTimesOutNamingMissingKeys) {
  auto s = client();
  s->set("rank/0", "here");
  s->set("rank/2", "here");
  try {
    s->wait({"rank/0", "rank/1", "rank/2", "rank/3"}, 0.2);
    FAIL() << "wait returned";
  } catch (const Timeout& e) {
    std::string w = e.what();
    EXPECT_NE(w.find("[rank/1, rank/3]"), std::string::npos) << w;
    EXPECT_NE(w.find("timed out"), std::string::npos) << w;
  }
  // The connection is still usable after a timeout.
  s->set("rank/1", "x");
  s->set("rank/3", "x");
  s->wait({"rank/0", "rank/1", "rank/2", "rank/3"}, 5);
}

TEST_P(StoreTest, PrefixStoreNamespaces) {
  auto base = client();
  PrefixStore a("jobA", base), b("jobB", base);
  a.set("k", "1");
  b.set("k", "2");
  EXPECT_EQ(a.get("k"), "1");
  EXPECT_EQ(b.get("k"), "2");
  EXPECT_EQ(base->get("jobA/k"), "1");
}

INSTANTIATE_TEST_SUITE_P(All, StoreTest, ::testing::Values("memory", "file", "tcp"));

TEST(TcpStore, WrongTokenIsRefusedAndLogged) {
  TcpStoreServer server("127.0.0.1", 0, "right-token");
  try {
    TcpStore bad("127.0.0.1", server.port(), "wrong-token", 5);
    FAIL() << "connected with a wrong token";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("wrong job token"), std::string::npos) << e.what();
  }
  EXPECT_EQ(server.refused(), 1);
  TcpStore good("127.0.0.1", server.port(), "right-token", 5);
  good.set("k", "v");
  EXPECT_EQ(good.get("k"), "v");
}

TEST(TcpStore, ListensOnLoopbackByDefault) {
  TcpStoreServer server("", 0, "t");
  EXPECT_EQ(server.host(), "127.0.0.1");
  EXPECT_EQ(server.url(), "tcp://127.0.0.1:" + std::to_string(server.port()));
}

TEST(TcpStore, UnreachableServerTimesOutClearly) {
  int port;
  {
    TcpStoreServer s("127.0.0.1", 0, "t");
    port = s.port();
  }
  try {
    TcpStore c("127.0.0.1", port, "t", 0.3);
    FAIL();
  } catch (const Timeout& e) {
    EXPECT_NE(std::string(e.what()).find("cannot connect to 127.0.0.1:" + std::to_string(port)), std::string::npos)
        << e.what();
  }
}

TEST(OpenStore, RejectsBadUrls) {
  EXPECT_THROW(open_store("udp://x:1", "t", 1), InvalidArgument);
  EXPECT_THROW(open_store("tcp://nohost", "t", 1), InvalidArgument);
  EXPECT_THROW(open_store("tcp://h:notaport", "t", 1), InvalidArgument);
}

}  // namespace
}  // namespace dtrain
