#include "comm/tcp_store.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "base/error.h"
#include "base/log.h"
#include "comm/store_service.h"
#include "comm/tcp_store_protocol.h"

namespace dtrain {
namespace sp = store_protocol;

// ---------------------------------------------------------------- server
//
// One thread polls the listening socket, a wake pipe (for shutdown) and every client. The
// protocol itself (frames, login, waits, limits) is StoreService's; this loop moves bytes:
// it reads what a client sent into the service, writes the service's answers without ever
// blocking (a client that does not read is polled for POLLOUT, and dropped past the outbox
// limit), and closes what the service gives up on.
//
// Descriptors: the number of clients is capped below ulimit -n. If accept() still fails for
// lack of descriptors (other threads of the process use them too), the server frees a spare
// descriptor it holds for this, accepts the connection, tells it why and closes it, so the
// pending connection leaves the backlog and poll() does not wake again for it (no spinning).

struct TcpStoreServer::State {
  explicit State(std::string token, StoreLimits limits) : service(std::move(token), limits) {}
  StoreService service;
  std::map<int, Fd> conns;  // by fd (the service's client id)
  Fd spare;                 // released to accept (and refuse) a connection when fds run out
  bool warned_fds = false;
};

namespace {
int fd_budget(int wanted) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return wanted;
  // Keep room for the rest of the process (the ranks' own sockets, files, shm) and the spare.
  long room = static_cast<long>(rl.rlim_cur) - 64 - static_cast<long>(rl.rlim_cur) / 4;
  return static_cast<int>(std::max(1L, std::min<long>(wanted, room)));
}

// Sends what fits now; false when the connection is broken.
bool flush(int fd, std::string& out) {
  while (!out.empty()) {
    ssize_t k = ::send(fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      out.erase(0, static_cast<size_t>(k));
      continue;
    }
    return k < 0 && (errno == EAGAIN || errno == EINTR);
  }
  return true;
}
}  // namespace

TcpStoreServer::TcpStoreServer(const std::string& host, int port, std::string token, StoreLimits limits)
    : host_(host.empty() ? "127.0.0.1" : host), token_(std::move(token)) {
  limits.max_clients = fd_budget(limits.max_clients);
  limits.max_prelogin_clients = std::max(1, std::min(limits.max_prelogin_clients, limits.max_clients));
  state_ = std::make_unique<State>(token_, limits);
  listen_fd_ = listen_tcp(host_, port, &port_);
  set_nonblocking(listen_fd_.get(), true);
  int pipefd[2];
  DT_SYSCHECK(::pipe2(pipefd, O_CLOEXEC | O_NONBLOCK), "pipe for the store server");
  wake_read_ = Fd(pipefd[0]);
  wake_write_ = Fd(pipefd[1]);
  state_->spare = Fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
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

int TcpStoreServer::max_clients() const { return state_->service.limits().max_clients; }

void TcpStoreServer::accept_ready() {
  State& s = *state_;
  for (int n = 0; n < 64; ++n) {  // a bounded batch, then the clients get their turn
    int cfd = ::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (cfd < 0) {
      if (errno != EMFILE && errno != ENFILE) return;  // EAGAIN: drained; others: try next round
      if (!s.spare.valid()) return;
      s.spare.reset();
      Fd refused(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (refused.valid()) {
        std::string err = store_protocol::encode(
            store_protocol::kErr,
            {"store server is out of file descriptors (raise ulimit -n); retry later", store_protocol::kRetryLater});
        flush(refused.get(), err);
        refused_++;
      }
      refused.reset();
      s.spare = Fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
      if (!s.warned_fds) {
        DT_LOG(Warn) << "store server: out of file descriptors; refusing connections (raise ulimit -n)";
        s.warned_fds = true;
      }
      continue;
    }
    Fd fd(cfd);
    set_nodelay(cfd);
    std::string refusal;
    std::vector<int> evicted;
    bool admitted = s.service.admit(cfd, peer_name(cfd), &refusal, &evicted);
    refused_by_service_.store(s.service.refused());  // before the refusal can reach the client
    if (!admitted) {
      flush(cfd, refusal);
      continue;
    }
    for (int e : evicted) s.conns.erase(e);
    s.conns.emplace(cfd, std::move(fd));
  }
}

void TcpStoreServer::drop(int fd) {
  State& s = *state_;
  if (s.service.has(fd)) {
    flush(fd, s.service.outbox(fd));  // best effort: the reason, usually
    s.service.close(fd);
  }
  s.conns.erase(fd);
}

void TcpStoreServer::serve() {
  State& s = *state_;
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    fds.push_back({wake_read_.get(), POLLIN, 0});
    fds.push_back({listen_fd_.get(), POLLIN, 0});
    for (auto& [fd, conn] : s.conns)
      fds.push_back({fd, static_cast<short>(POLLIN | (s.service.outbox(fd).empty() ? 0 : POLLOUT)), 0});
    int rc = ::poll(fds.data(), fds.size(), s.service.next_timeout_ms());
    if (rc < 0 && errno != EINTR) {
      DT_LOG(Error) << "store server: poll failed: " << errno_string(errno);
      return;
    }
    if (fds[0].revents) return;  // shutdown
    if (fds[1].revents & POLLIN) accept_ready();
    for (size_t i = 2; i < fds.size(); ++i) {
      int fd = fds[i].fd;
      if (!fds[i].revents || !s.service.has(fd)) continue;
      bool keep = true;
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[65536];
        ssize_t k = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) keep = false;
        if (k > 0) keep = s.service.feed(fd, buf, static_cast<size_t>(k));
        // Counted before the answer (a refusal) can reach the client, who may look at once.
        refused_by_service_.store(s.service.refused());
      }
      if (!keep) {
        drop(fd);
        continue;
      }
    }
    for (int late : s.service.tick()) drop(late);
    // Answers (including those a tick produced for other clients' waits) leave now.
    std::vector<int> broken;
    for (auto& [fd, conn] : s.conns)
      if (!s.service.outbox(fd).empty() && !flush(fd, s.service.outbox(fd))) broken.push_back(fd);
    for (int fd : broken) drop(fd);
  }
}

// ---------------------------------------------------------------- client

namespace {
// A login the server refused for a passing reason (ERR with kRetryLater): busy, or out of
// descriptors. The constructor connects again until its timeout.
struct RefusedForNow : IoError {
  using IoError::IoError;
};
}  // namespace

// Connects and logs in. A refusal for now is retried with a growing pause (10 ms .. 0.2 s)
// until the connect timeout, as the server's message invites; the last refusal is the error.
TcpStore::TcpStore(const std::string& host, int port, const std::string& token, double timeout_s)
    : Store(timeout_s), address_(host + ":" + std::to_string(port)) {
  Deadline deadline = Deadline::after(timeout_s < 0 ? 1e9 : timeout_s);
  int pause_ms = 10;
  for (int attempt = 1;; ++attempt) {
    fd_ = connect_tcp(host, port, deadline);
    try {
      request(sp::kHello, {token}, 0);
      return;
    } catch (const RefusedForNow& e) {
      if (deadline.expired())
        DT_THROW(IoError, e.what() << " (" << attempt << " attempts within the " << timeout_s << " s timeout)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(pause_ms, deadline.remaining_ms())));
    pause_ms = std::min(pause_ms * 2, 200);
  }
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
    std::string why = out.empty() ? "?" : out[0];
    // A refused login (or a server that is full) ends the connection; a wrong request (an ADD
    // to a non-number, say) is answered and the connection stays usable.
    if (op != sp::kHello && rop == sp::kErr) throw InvalidArgument(why);
    fd_.reset();
    if (op == sp::kHello && rop == sp::kErr && out.size() > 1 && out[1] == sp::kRetryLater)
      throw RefusedForNow(what + " refused the login: " + why);
    DT_THROW(IoError, what << " refused the request: " << why);
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
  std::string v = request(sp::kAdd, {key, std::to_string(delta)}, 0).at(0);
  int64_t out = 0;
  DT_CHECK(parse_store_int(v, &out), Corrupt, "store " << address_ << ": add answered '" << v << "', not an integer");
  return out;
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
