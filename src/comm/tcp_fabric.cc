// comm/tcp_fabric.cc — the tcp fabric: one TCP connection per peer pair.
//
// Setup (collective): each rank listens on opts.bind_host:0 and publishes "tcp/RANK" =
// "HOST:PORT" in the store. Rank r then connects to every lower rank (the listen backlog
// accepts them before anyone calls accept) and accepts one connection from every higher
// rank. A connecting rank introduces itself with {magic, rank, job token}; a connection with
// a wrong magic or token is logged and dropped. Sockets are non-blocking with TCP_NODELAY:
// the engine writes whole small messages at once and lets the kernel pipeline large ones.
// Their congestion control follows opts.tcp_congestion (see choose_congestion_control).
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "base/copy.h"
#include "base/error.h"
#include "base/log.h"
#include "comm/fabric.h"
#include "comm/socket.h"
#include "comm/store.h"
#include "comm/tcp_hello.h"

namespace dtrain {
namespace {

class TcpChannel : public Channel {
 public:
  TcpChannel(Fd fd, int me, int peer) : fd_(std::move(fd)), me_(me), peer_(peer), name_(peer_name(fd_.get())) {}
  size_t write_some(const void* data, size_t n) override {
    ssize_t k = ::send(fd_.get(), data, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (k >= 0) return static_cast<size_t>(k);
    if (errno == EAGAIN || errno == EINTR) return 0;
    fail("send failed: " + errno_string(errno));
  }
  // Small reads (a header, a small payload) are served from a 4 KiB buffer filled by one
  // recv, so a small message costs one system call instead of two; large reads go straight
  // into the caller's memory once the buffer is empty.
  size_t read_some(void* data, size_t n) override {
    if (n == 0) return 0;
    if (buffered_ == 0 && n < sizeof buffer_) {
      buffered_ = recv_into(buffer_, sizeof buffer_);
      start_ = 0;
    }
    if (buffered_ > 0) {
      size_t k = std::min(n, buffered_);
      copy_memory(data, buffer_ + start_, k);
      start_ += k;
      buffered_ -= k;
      return k;
    }
    return n < sizeof buffer_ ? 0 : recv_into(data, n);
  }
  int fd() const { return fd_.get(); }
  void shutdown() { ::shutdown(fd_.get(), SHUT_RDWR); }

 private:
  size_t recv_into(void* data, size_t n) {
    ssize_t k = ::recv(fd_.get(), data, n, MSG_DONTWAIT);
    if (k > 0) return static_cast<size_t>(k);
    if (k == 0) fail("connection closed by the peer (it exited or closed its transport)");
    if (errno == EAGAIN || errno == EINTR) return 0;
    fail("recv failed: " + errno_string(errno));
  }

  [[noreturn]] void fail(const std::string& why) {
    throw PeerFailure("rank " + std::to_string(me_) + " <-> rank " + std::to_string(peer_) + " (tcp " + name_ +
                          "): " + why,
                      peer_);
  }
  Fd fd_;
  int me_, peer_;
  std::string name_;
  char buffer_[4096];
  size_t start_ = 0, buffered_ = 0;
};

class TcpFabric : public Fabric {
 public:
  TcpFabric(int rank, int size) : rank_(rank), channels_(size) {
    int efd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    DT_SYSCHECK(efd, "eventfd");
    wake_fd_ = Fd(efd);
  }
  const char* kind() const override { return "tcp"; }
  Channel* channel(int peer) override { return channels_[peer].get(); }
  uint64_t activity_token() override { return 0; }
  void sleep(uint64_t, int timeout_ms, const std::vector<int>& want_write) override {
    std::vector<pollfd> fds;
    fds.push_back({wake_fd_.get(), POLLIN, 0});
    for (size_t p = 0; p < channels_.size(); ++p)
      if (channels_[p]) fds.push_back({channels_[p]->fd(), POLLIN, 0});
    for (int p : want_write)
      for (auto& f : fds)
        if (channels_[p] && f.fd == channels_[p]->fd()) f.events |= POLLOUT;
    ::poll(fds.data(), fds.size(), timeout_ms);
    if (fds[0].revents) {
      uint64_t v;
      ssize_t ignored = ::read(wake_fd_.get(), &v, sizeof v);
      (void)ignored;
    }
  }
  std::string peer_gone(int) override { return ""; }  // a dead peer's socket reports it
  // The kernel copies a send into pages of its own from their start (a connection whose
  // earlier bytes were all read reuses its page from offset 0), and that copy ran at half
  // speed when it wrote less than a cache line ahead of where it read modulo 4 KiB: a
  // page-aligned 1 MiB tensor behind the 16-byte header (transport.cc).
  size_t payload_alignment() const override { return 64; }
  bool holds_early_payloads() const override { return true; }
  void close() override {
    for (auto& c : channels_)
      if (c) c->shutdown();
    wake();
  }
  void wake() override {
    uint64_t one = 1;
    ssize_t ignored = ::write(wake_fd_.get(), &one, sizeof one);
    (void)ignored;
  }

  int rank_;
  std::vector<std::unique_ptr<TcpChannel>> channels_;
  Fd wake_fd_;
};

// Loopback under bbr, the 2-vCPU VM's default: 1 MiB all-reduce on 2 ranks 383 us, 241 with
// reno; 16 MiB on 4 ranks 22.6 ms, 15.4 with reno; a 0.94 MB exchange 190-370 us, 160-170 with
// reno, and steady where bbr's times were bimodal. bbr paces its sends at its estimate of the
// path's rate (our reading of it, not traced in the kernel); reno sends what the window allows.
// Returns what the connection was switched from and to ("bbr -> reno"), or "" if untouched.
std::string choose_congestion_control(int fd, int rank, const std::string& setting) {
  const std::string was = tcp_congestion(fd);
  const std::string want = congestion_to_set(setting, peer_on_this_host(fd), was);
  if (want.empty()) return "";
  const std::string why = set_tcp_congestion(fd, want);
  if (why.empty()) return was + " -> " + want;
  DT_CHECK(setting == "auto", InvalidArgument,
           "rank " << rank << ": DTRAIN_TCP_CONGESTION=" << setting << " refused by the kernel on the connection to "
                   << peer_name(fd) << " (" << why << "); name a permitted algorithm, or auto or system");
  DT_LOG(Debug) << "rank " << rank << ": kept the system's congestion control on " << peer_name(fd) << ": " << why;
  return "";
}

}  // namespace

std::unique_ptr<Fabric> make_tcp_fabric(Store& store, int rank, int size, const FabricOptions& opts) {
  auto fabric = std::make_unique<TcpFabric>(rank, size);
  Deadline deadline = Deadline::after(opts.connect_timeout_s);
  int port = 0;
  Fd listener = listen_tcp(opts.bind_host, 0, &port);
  std::string host = opts.bind_host;
  if (host.empty() || host == "0.0.0.0") {
    char name[256] = {0};
    ::gethostname(name, sizeof name - 1);
    host = name;
  }
  store.set("tcp/" + std::to_string(rank), host + ":" + std::to_string(port));

  // Connect to every lower rank.
  for (int peer = 0; peer < rank; ++peer) {
    auto [phost, pport] = split_host_port(store.get("tcp/" + std::to_string(peer), deadline.remaining_seconds()),
                                          "tcp address of rank " + std::to_string(peer));
    Fd fd = connect_tcp(phost, pport, deadline);
    DT_CHECK(opts.token.size() <= kMaxTcpToken, InvalidArgument,
             "DTRAIN_TOKEN has " << opts.token.size() << " bytes; the limit is " << kMaxTcpToken);
    std::string hello = encode_tcp_hello(static_cast<uint32_t>(rank), opts.token);
    write_full(fd.get(), hello.data(), hello.size(), deadline, "tcp hello to rank " + std::to_string(peer));
    fabric->channels_[peer] = std::make_unique<TcpChannel>(std::move(fd), rank, peer);
  }
  // Accept one connection from every higher rank.
  int expected = size - 1 - rank;
  while (expected > 0) {
    Fd fd = accept_tcp(listener.get(), deadline);
    if (!fd.valid()) {
      std::ostringstream missing;
      for (int peer = rank + 1; peer < size; ++peer)
        if (!fabric->channels_[peer]) missing << " " << peer;
      DT_THROW(Timeout, "rank " << rank << ": tcp transport: ranks" << missing.str() << " never connected within "
                                << opts.connect_timeout_s << " s (did they start? can they reach " << host << ":"
                                << port << "?)");
    }
    std::vector<bool> connected(size);
    for (int p = 0; p < size; ++p) connected[p] = fabric->channels_[p] != nullptr;
    HelloCheck hello;
    std::string bytes;
    try {
      Deadline by = Deadline::after(std::min(5.0, deadline.remaining_seconds()));
      while ((hello = check_tcp_hello(bytes, rank, size, opts.token, connected)).verdict == HelloVerdict::kNeedMore) {
        size_t have = bytes.size();
        bytes.resize(hello.need);
        read_full(fd.get(), bytes.data() + have, hello.need - have, by, "tcp hello");
      }
    } catch (const Error& e) {
      DT_LOG(Warn) << "rank " << rank << ": dropped a tcp connection from " << peer_name(fd.get()) << ": " << e.what();
      continue;
    }
    if (hello.verdict != HelloVerdict::kAccepted) {
      DT_LOG(Warn) << "rank " << rank << ": refused a tcp connection from " << peer_name(fd.get())
                   << " (not a rank of this job: " << hello.why << ")";
      continue;
    }
    const int r = hello.rank;
    fabric->channels_[r] = std::make_unique<TcpChannel>(std::move(fd), rank, r);
    --expected;
  }
  int switched = 0;
  std::string how;
  for (auto& c : fabric->channels_)
    if (c) {
      set_nonblocking(c->fd(), true);
      std::string change = choose_congestion_control(c->fd(), rank, opts.tcp_congestion);
      if (!change.empty()) ++switched, how = change;
    }
  if (switched) {
    DT_LOG(Info) << "rank " << rank << ": congestion control " << how << " on " << switched
                 << " tcp connection(s) (DTRAIN_TCP_CONGESTION=" << opts.tcp_congestion << ")";
  }
  return fabric;
}

}  // namespace dtrain
