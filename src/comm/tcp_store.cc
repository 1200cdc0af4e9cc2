#include "comm/tcp_store.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <list>
#include <map>

#include "base/error.h"
#include "base/log.h"
#include "comm/tcp_store_protocol.h"

namespace dtrain {
namespace sp = store_protocol;

// ---------------------------------------------------------------- server
//
// One thread polls the listening socket, a wake pipe (for shutdown) and every client. A
// client's bytes accumulate until a whole frame is there; the frame is handled at once,
// except GET/WAIT on missing keys, which become pending waits answered when a SET/ADD makes
// them complete or when their deadline passes (then with the missing keys).

struct TcpStoreServer::State {
  struct Client {
    Fd fd;
    std::string name;
    std::string inbox;
    bool authenticated = false;
  };
  struct PendingWait {
    int client;
    std::vector<std::string> keys;
    Deadline deadline;
    double timeout_s;
    bool is_get;
  };
  std::map<int, Client> clients;  // by fd
  std::map<std::string, std::string> data;
  std::list<PendingWait> waits;
};

TcpStoreServer::TcpStoreServer(const std::string& host, int port, std::string token)
    : host_(host.empty() ? "127.0.0.1" : host), token_(std::move(token)), state_(std::make_unique<State>()) {
  listen_fd_ = listen_tcp(host_, port, &port_);
  int pipefd[2];
  DT_SYSCHECK(::pipe2(pipefd, O_CLOEXEC | O_NONBLOCK), "pipe for the store server");
  wake_read_ = Fd(pipefd[0]);
  wake_write_ = Fd(pipefd[1]);
  thread_ = std::thread([this] { serve(); });
}

TcpStoreServer::~TcpStoreServer() {
  char c = 'x';
  ssize_t ignored = ::write(wake_write_.get(), &c, 1);
  (void)ignored;
  thread_.join();
}

std::string TcpStoreServer::url() const {
  bool v6 = host_.find(':') != std::string::npos;
  return "tcp://" + (v6 ? "[" + host_ + "]" : host_) + ":" + std::to_string(port_);
}

namespace {
void reply(int fd, uint8_t op, const std::vector<std::string>& fields) {
  std::string frame = sp::encode(op, fields);
  // Answers are small; a client that does not read within 5 s is dropped by the caller.
  write_full(fd, frame.data(), frame.size(), Deadline::after(5), "store server reply");
}

bool all_present(const std::map<std::string, std::string>& data, const std::vector<std::string>& keys) {
  return std::all_of(keys.begin(), keys.end(), [&](const std::string& k) { return data.count(k) > 0; });
}

std::vector<std::string> missing(const std::map<std::string, std::string>& data, const std::vector<std::string>& keys) {
  std::vector<std::string> out;
  for (const auto& k : keys)
    if (!data.count(k)) out.push_back(k);
  return out;
}

bool constant_time_equal(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}
}  // namespace

void TcpStoreServer::serve() {
  State& s = *state_;
  auto answer_waits = [&](bool expire_only) {
    for (auto it = s.waits.begin(); it != s.waits.end();) {
      bool ready = all_present(s.data, it->keys);
      bool expired = it->deadline.expired();
      if (!ready && !expired) {
        ++it;
        continue;
      }
      auto c = s.clients.find(it->client);
      if (c != s.clients.end()) {
        try {
          if (ready) reply(c->first, sp::kOk, it->is_get ? std::vector<std::string>{s.data[it->keys[0]]}
                                                          : std::vector<std::string>{});
          else reply(c->first, sp::kTimeout, missing(s.data, it->keys));
        } catch (const Error&) {
          s.clients.erase(c);
        }
      }
      it = s.waits.erase(it);
    }
    (void)expire_only;
  };

  auto handle = [&](int fd, State::Client& c, const std::string& body) -> bool {
    std::vector<std::string> f;
    uint8_t op = sp::decode(body, &f);
    if (!c.authenticated) {
      if (op != sp::kHello || f.size() != 1 || !constant_time_equal(f[0], token_)) {
        refused_++;
        DT_LOG(Warn) << "store server: refused connection from " << c.name
                     << ": wrong job token (the client must present this job's DTRAIN_TOKEN)";
        reply(fd, sp::kErr, {"wrong job token: this store belongs to another job (check DTRAIN_TOKEN)"});
        return false;
      }
      c.authenticated = true;
      reply(fd, sp::kOk, {});
      return true;
    }
    auto need = [&](size_t n) {
      DT_CHECK(f.size() >= n, Corrupt, "store protocol: op " << int(op) << " needs " << n << " fields");
    };
    switch (op) {
      case sp::kSet:
        need(2);
        s.data[f[0]] = f[1];
        reply(fd, sp::kOk, {});
        answer_waits(false);
        break;
      case sp::kAdd: {
        need(2);
        auto it = s.data.find(f[0]);
        int64_t v = (it == s.data.end() ? 0 : std::stoll(it->second)) + std::stoll(f[1]);
        s.data[f[0]] = std::to_string(v);
        reply(fd, sp::kOk, {std::to_string(v)});
        answer_waits(false);
        break;
      }
      case sp::kGet:
      case sp::kWait: {
        need(2);
        double timeout_s = std::stod(f[op == sp::kGet ? 1 : 0]);
        std::vector<std::string> keys = op == sp::kGet ? std::vector<std::string>{f[0]}
                                                       : std::vector<std::string>(f.begin() + 1, f.end());
        s.waits.push_back({fd, keys, Deadline::after(timeout_s), timeout_s, op == sp::kGet});
        answer_waits(false);
        break;
      }
      case sp::kCheck:
        reply(fd, sp::kOk, {all_present(s.data, f) ? "1" : "0"});
        break;
      case sp::kDelete:
        need(1);
        reply(fd, sp::kOk, {s.data.erase(f[0]) ? "1" : "0"});
        break;
      default:
        DT_THROW(Corrupt, "store protocol: unknown op " << int(op));
    }
    return true;
  };

  for (;;) {
    std::vector<pollfd> fds;
    fds.push_back({wake_read_.get(), POLLIN, 0});
    fds.push_back({listen_fd_.get(), POLLIN, 0});
    for (auto& [fd, c] : s.clients) fds.push_back({fd, POLLIN, 0});
    int timeout_ms = 1000;
    for (auto& w : s.waits) timeout_ms = std::min(timeout_ms, w.deadline.remaining_ms());
    int rc = ::poll(fds.data(), fds.size(), timeout_ms);
    if (rc < 0 && errno != EINTR) {
      DT_LOG(Error) << "store server: poll failed: " << errno_string(errno);
      return;
    }
    if (fds[0].revents) return;  // shutdown
    if (fds[1].revents & POLLIN) {
      int cfd = ::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (cfd >= 0) {
        set_nodelay(cfd);
        State::Client c;
        c.fd = Fd(cfd);
        c.name = peer_name(cfd);
        s.clients.emplace(cfd, std::move(c));
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      int fd = fds[i].fd;
      auto it = s.clients.find(fd);
      if (it == s.clients.end()) continue;
      State::Client& c = it->second;
      bool keep = true;
      char buf[65536];
      ssize_t k = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) keep = false;
      if (k > 0) c.inbox.append(buf, static_cast<size_t>(k));
      try {
        while (keep && c.inbox.size() >= 4) {
          uint32_t n;
          std::memcpy(&n, c.inbox.data(), 4);
          DT_CHECK(n <= sp::kMaxFrame, Corrupt, "store protocol: frame of " << n << " bytes is too large");
          if (c.inbox.size() < 4 + n) break;
          std::string body = c.inbox.substr(4, n);
          c.inbox.erase(0, 4 + n);
          keep = handle(fd, c, body);
        }
      } catch (const std::exception& e) {
        DT_LOG(Warn) << "store server: dropping client " << c.name << ": " << e.what();
        keep = false;
      }
      if (!keep) {
        s.waits.remove_if([fd](const State::PendingWait& w) { return w.client == fd; });
        s.clients.erase(it);
      }
    }
    answer_waits(true);
  }
}

// ---------------------------------------------------------------- client

TcpStore::TcpStore(const std::string& host, int port, const std::string& token, double timeout_s)
    : Store(timeout_s), address_(host + ":" + std::to_string(port)) {
  fd_ = connect_tcp(host, port, Deadline::after(timeout_s < 0 ? 1e9 : timeout_s));
  auto r = request(sp::kHello, {token}, 0);
  (void)r;
}

std::vector<std::string> TcpStore::request(uint8_t op, const std::vector<std::string>& fields, double wait_s) {
  std::lock_guard<std::mutex> lock(mu_);
  DT_CHECK(fd_.valid(), IoError, "store " << address_ << ": connection was lost earlier");
  std::string what = "store " + address_;
  std::string frame = sp::encode(op, fields);
  // The server answers a wait by its deadline; allow the answer the store's timeout more to
  // arrive (1..10 s), so an unreachable store fails a request about as fast as a peer times out.
  const double slack = std::clamp(timeout() < 0 ? 10.0 : timeout(), 1.0, 10.0);
  Deadline deadline = Deadline::after(wait_s < 0 ? -1 : wait_s + slack);
  try {
    write_full(fd_.get(), frame.data(), frame.size(), deadline, what);
    uint32_t n;
    read_full(fd_.get(), &n, 4, deadline, what);
    DT_CHECK(n <= sp::kMaxFrame && n > 0, Corrupt, what << ": bad frame length " << n);
    std::string body(n, '\0');
    read_full(fd_.get(), body.data(), n, deadline, what);
    std::vector<std::string> out;
    uint8_t rop = sp::decode(body, &out);
    if (rop == sp::kOk) return out;
    if (rop == sp::kTimeout) DT_THROW(Timeout, missing_keys_message(out, wait_s));
    fd_.reset();
    DT_THROW(IoError, what << " refused the request: " << (out.empty() ? "?" : out[0]));
  } catch (const IoError&) {
    fd_.reset();
    throw;
  }
}

void TcpStore::set(const std::string& key, const std::string& value) { request(sp::kSet, {key, value}, 0); }

std::string TcpStore::get(const std::string& key, double timeout_s) {
  double t = resolve(timeout_s);
  return request(sp::kGet, {key, std::to_string(t < 0 ? 1e9 : t)}, t).at(0);
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  return std::stoll(request(sp::kAdd, {key, std::to_string(delta)}, 0).at(0));
}

void TcpStore::wait(const std::vector<std::string>& keys, double timeout_s) {
  double t = resolve(timeout_s);
  std::vector<std::string> fields{std::to_string(t < 0 ? 1e9 : t)};
  fields.insert(fields.end(), keys.begin(), keys.end());
  request(sp::kWait, fields, t);
}

bool TcpStore::check(const std::vector<std::string>& keys) { return request(sp::kCheck, keys, 0).at(0) == "1"; }

bool TcpStore::remove(const std::string& key) { return request(sp::kDelete, {key}, 0).at(0) == "1"; }

}  // namespace dtrain
