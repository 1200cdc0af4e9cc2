// comm/socket.h — thin, checked wrappers over TCP sockets.
//
// Contract
// - Fd owns a file descriptor and closes it once. All functions throw IoError naming the
//   address or operation, or Timeout when a Deadline runs out; none blocks past its deadline.
// - listen_tcp binds host:port (port 0 = any free port; host "" or "0.0.0.0" = all
//   interfaces) and returns the socket and the port actually bound.
// - connect_tcp retries refused connections until the deadline (the server may not be up yet).
// - read_full / write_full move exactly n bytes, polling with the deadline; read_full throws
//   IoError "connection closed by HOST:PORT" on EOF.
// Thread-safety: functions are stateless; an Fd is not shared.
#pragma once

#include <string>
#include <utility>

#include "base/clock.h"

namespace dtrain {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset();

 private:
  int fd_ = -1;
};

Fd listen_tcp(const std::string& host, int port, int* bound_port);
Fd connect_tcp(const std::string& host, int port, const Deadline& deadline);
// Accepts one connection; returns an invalid Fd if the deadline passes first.
Fd accept_tcp(int listen_fd, const Deadline& deadline);

void write_full(int fd, const void* data, size_t n, const Deadline& deadline, const std::string& what);
void read_full(int fd, void* data, size_t n, const Deadline& deadline, const std::string& what);

void set_nodelay(int fd);
void set_nonblocking(int fd, bool on);
// The connection's congestion control ("reno", "cubic", "bbr", ...); "" where it cannot be read.
std::string tcp_congestion(int fd);
// Sets it; returns "" on success, else why not (the kernel's words and, where the algorithm
// is not permitted, the algorithms net.ipv4.tcp_allowed_congestion_control lets this process use).
std::string set_tcp_congestion(int fd, const std::string& algorithm);
// True when both ends of the connected socket are on this host: the same address, or loopback.
bool peer_on_this_host(int fd);
// The algorithm a connection should be switched to under `setting` (DTRAIN_TCP_CONGESTION:
// auto, system or a name), or "" to leave `current` alone. auto: reno within one host.
std::string congestion_to_set(const std::string& setting, bool same_host, const std::string& current);
std::string peer_name(int fd);   // "127.0.0.1:53122"
std::string local_name(int fd);

// Splits "HOST:PORT" (IPv6 as "[::1]:PORT"); throws InvalidArgument naming `what`.
std::pair<std::string, int> split_host_port(const std::string& text, const std::string& what);

}  // namespace dtrain
