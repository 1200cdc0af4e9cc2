// comm/store_service.h — the TCP store server's protocol state machine, without sockets.
//
// The server (tcp_store.cc) owns the sockets; this class owns everything a client can make it
// hold: the data, the pending waits and each connection's buffers, and it decides, for bytes
// that arrive, what to answer and whether to keep the connection. Keeping it apart makes the
// protocol testable and fuzzable byte by byte (tests/fuzz/store_protocol_fuzz.cc).
//
// Contract (see tcp_store.h for the frames)
// - admit(id, name): a new connection. Refused (an ERR frame in *refusal, to send before
//   closing) when limits.max_clients are connected. When limits.max_prelogin_clients have not
//   logged in yet, the oldest of them is evicted (returned in *evicted, to be closed) so a
//   crowd of silent connections cannot keep the job's ranks out.
// - Before a good HELLO a client may send one frame of at most limits.max_prelogin_frame
//   bytes, within limits.login_timeout_s; a bigger frame is refused at its length prefix, so
//   the server never buffers more than one recv() of an unauthenticated client.
// - feed(id, bytes) handles every whole frame, appending answers to outbox(id). It returns
//   false when the connection must be closed (after sending what is in its outbox): a wrong
//   token, a malformed frame, a frame over the limit, an outbox over limits.max_outbox.
//   An authenticated request that is well-formed but wrong (ADD to a non-number or past
//   int64, a negative or non-numeric timeout) is answered with ERR and the connection kept.
// - tick() answers waits that are complete or past their deadline and returns the clients
//   past their login deadline (to close); next_timeout_ms() says when tick is next due.
// - Nothing throws out of admit / feed / tick / close.
// Thread-safety: none; the server's one thread drives it.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <vector>

#include "base/clock.h"

namespace dtrain {

struct StoreLimits {
  uint32_t max_prelogin_frame = 4096;  // bytes of a frame before HELLO succeeded
  uint32_t max_frame = 64u << 20;      // after: a store is for rendezvous, not bulk data
  double login_timeout_s = 10;         // a connection must present the token within this
  int max_clients = 4096;              // connections at once (the server lowers it to fit ulimit -n)
  int max_prelogin_clients = 256;      // of which not logged in yet
  size_t max_outbox = 256u << 20;      // unread answers kept for one client
};

class StoreService {
 public:
  StoreService(std::string token, StoreLimits limits) : token_(std::move(token)), limits_(limits) {}

  bool admit(int id, const std::string& name, std::string* refusal, std::vector<int>* evicted);
  bool feed(int id, const char* data, size_t n);
  std::vector<int> tick();
  void close(int id);
  int next_timeout_ms() const;

  std::string& outbox(int id) { return clients_.at(id).outbox; }
  bool has(int id) const { return clients_.count(id) > 0; }
  size_t clients() const { return clients_.size(); }
  int refused() const { return refused_; }
  const StoreLimits& limits() const { return limits_; }

 private:
  struct Client {
    std::string name;
    std::string inbox, outbox;
    bool authenticated = false;
    Deadline login;
    uint64_t order = 0;  // admission order (eviction picks the oldest)
  };
  struct PendingWait {
    int client;
    std::vector<std::string> keys;
    Deadline deadline;
    bool is_get;
  };
  bool handle(int id, Client& c, const std::string& body);
  void handle_request(int id, Client& c, uint8_t op, const std::vector<std::string>& f);
  void answer_waits();
  void reply(Client& c, uint8_t op, const std::vector<std::string>& fields);

  std::string token_;
  StoreLimits limits_;
  std::map<int, Client> clients_;
  std::map<std::string, std::string> data_;
  std::list<PendingWait> waits_;
  uint64_t admitted_ = 0;
  int refused_ = 0;
};

}  // namespace dtrain
