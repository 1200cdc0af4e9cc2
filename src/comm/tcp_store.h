// comm/tcp_store.h — the rendezvous store over TCP: a server thread and a client.
//
// Protocol (all integers little-endian; one request, one response, per connection in order)
//   frame    = u32 length, then `length` bytes: u8 opcode, then fields
//   field    = u32 length + bytes            (strings and values)
//   HELLO(token) must come first, in a frame of at most 4 KiB, within 10 s of connecting
//   (StoreLimits); a wrong token, a bigger frame or a late login gets ERR and the connection
//   is closed, and the server logs who was refused.
//   SET(k, v) -> OK; GET(k, timeout_s) -> OK(v) | TIMEOUT(missing...);
//   ADD(k, i64 as decimal) -> OK(new value); WAIT(timeout_s, k...) -> OK | TIMEOUT(missing...);
//   CHECK(k...) -> OK("1"|"0"); DELETE(k) -> OK("1"|"0").
//   A wrong request after login (ADD to a non-number or past int64, a timeout that is not a
//   number >= 0) -> ERR(why), and the connection stays; the client throws InvalidArgument.
// Waits are kept on the server, which answers TIMEOUT at the deadline with the missing keys,
// so a client never reads a stale answer after its own timeout.
//
// TcpStoreServer: binds host:port (port 0 = any free port; host defaults to 127.0.0.1, i.e.
// loopback only unless a host address is asked for) and serves until destroyed. It holds at
// most limits.max_clients connections (lowered to fit ulimit -n); one more is answered ERR
// ("busy", or "out of file descriptors", marked retry-later) and closed, never left in the
// backlog.
// TcpStore (client): connects (retrying until its timeout, the server may start later; a
// server that answers "busy" or "out of descriptors" is tried again until then too) and is
// safe to use from several threads (one request at a time on its connection).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "comm/socket.h"
#include "comm/store.h"
#include "comm/store_service.h"

namespace dtrain {

class TcpStoreServer {
 public:
  TcpStoreServer(const std::string& host, int port, std::string token, StoreLimits limits = {});
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const { return port_; }
  const std::string& host() const { return host_; }
  // "tcp://HOST:PORT" for clients.
  std::string url() const;
  // Connections refused so far: wrong token, over a limit, late login (for tests and logs).
  int refused() const { return refused_.load() + refused_by_service_.load(); }
  // The connection cap in force (StoreLimits::max_clients, lowered to fit ulimit -n).
  int max_clients() const;

 private:
  struct State;
  void serve();
  void accept_ready();
  void drop(int fd);

  std::string host_;
  int port_ = 0;
  std::string token_;
  Fd listen_fd_;
  Fd wake_read_, wake_write_;
  std::atomic<int> refused_{0}, refused_by_service_{0};
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
