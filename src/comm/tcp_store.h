// comm/tcp_store.h — the rendezvous store over TCP: a server thread and a client.
//
// Protocol (all integers little-endian; one request, one response, per connection in order)
//   frame    = u32 length, then `length` bytes: u8 opcode, then fields
//   field    = u32 length + bytes            (strings and values)
//   HELLO(token) must come first; a wrong token gets ERR("wrong job token") and the
//   connection is closed, and the server logs who was refused.
//   SET(k, v) -> OK; GET(k, timeout_ms) -> OK(v) | TIMEOUT(missing...);
//   ADD(k, i64 as decimal) -> OK(new value); WAIT(timeout_ms, k...) -> OK | TIMEOUT(missing...);
//   CHECK(k...) -> OK("1"|"0"); DELETE(k) -> OK("1"|"0").
// Waits are kept on the server, which answers TIMEOUT at the deadline with the missing keys,
// so a client never reads a stale answer after its own timeout.
//
// TcpStoreServer: binds host:port (port 0 = any free port; host defaults to 127.0.0.1, i.e.
// loopback only unless a host address is asked for) and serves until destroyed.
// TcpStore (client): connects (retrying until its timeout, the server may start later) and is
// safe to use from several threads (one request at a time on its connection).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "comm/socket.h"
#include "comm/store.h"

namespace dtrain {

class TcpStoreServer {
 public:
  TcpStoreServer(const std::string& host, int port, std::string token);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const { return port_; }
  const std::string& host() const { return host_; }
  // "tcp://HOST:PORT" for clients.
  std::string url() const;
  // Number of connections refused for a wrong token so far (for tests and logs).
  int refused() const { return refused_.load(); }

 private:
  struct State;
  void serve();

  std::string host_;
  int port_ = 0;
  std::string token_;
  Fd listen_fd_;
  Fd wake_read_, wake_write_;
  std::atomic<int> refused_{0};
  std::unique_ptr<State> state_;
  std::thread thread_;
};

class TcpStore : public Store {
 public:
  TcpStore(const std::string& host, int port, const std::string& token, double timeout_s = 30);
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, double timeout_s = kDefaultTimeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, double timeout_s = kDefaultTimeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool remove(const std::string& key) override;

 private:
  std::vector<std::string> request(uint8_t op, const std::vector<std::string>& fields, double wait_s);
  std::string address_;
  std::mutex mu_;
  Fd fd_;
};

}  // namespace dtrain
