#include "comm/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>

#include "base/error.h"

namespace dtrain {

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

namespace {
// Resolves host (numeric or a name) for TCP; "" means any address.
addrinfo* resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  const char* h = (host.empty() || host == "*") ? nullptr : host.c_str();
  int rc = ::getaddrinfo(h, service.c_str(), &hints, &res);
  DT_CHECK(rc == 0, IoError, "cannot resolve host '" << host << "': " << gai_strerror(rc));
  return res;
}

std::string sockaddr_string(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
    return "[" + std::string(host) + "]:" + std::to_string(port);
  }
  return "?";
}
}  // namespace

Fd listen_tcp(const std::string& host, int port, int* bound_port) {
  addrinfo* res = resolve(host == "0.0.0.0" ? "" : host, port, true);
  std::string last_error = "no address";
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) continue;
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd.get(), 1024) != 0) {
      last_error = errno_string(errno);
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
    if (bound_port)
      *bound_port = ss.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port)
                                            : ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
    ::freeaddrinfo(res);
    return fd;
  }
  ::freeaddrinfo(res);
  DT_THROW(IoError, "cannot listen on " << (host.empty() ? "*" : host) << ":" << port << ": " << last_error);
}

Fd connect_tcp(const std::string& host, int port, const Deadline& deadline) {
  std::string last_error;
  int backoff_ms = 1;
  for (;;) {
    addrinfo* res = resolve(host, port, false);
    for (addrinfo* ai = res; ai; ai = ai->ai_next) {
      Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
      if (!fd.valid()) continue;
      set_nonblocking(fd.get(), true);
      int rc = ::connect(fd.get(), ai->ai_addr, ai->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        pollfd p{fd.get(), POLLOUT, 0};
        int prc = ::poll(&p, 1, std::min(deadline.remaining_ms(), 5000));
        int err = 0;
        socklen_t len = sizeof err;
        if (prc == 1) ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        else err = ETIMEDOUT;
        rc = err == 0 ? 0 : -1;
        errno = err;
      }
      if (rc == 0) {
        ::freeaddrinfo(res);
        set_nonblocking(fd.get(), false);
        set_nodelay(fd.get());
        return fd;
      }
      last_error = errno_string(errno);
    }
    ::freeaddrinfo(res);
    if (deadline.expired())
      DT_THROW(Timeout, "cannot connect to " << host << ":" << port << ": " << last_error
                                             << " (is the server up and the address right?)");
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(backoff_ms, deadline.remaining_ms())));
    backoff_ms = std::min(backoff_ms * 2, 100);
  }
}

Fd accept_tcp(int listen_fd, const Deadline& deadline) {
  for (;;) {
    pollfd p{listen_fd, POLLIN, 0};
    int rc = ::poll(&p, 1, std::min(deadline.remaining_ms(), 1000));
    if (rc < 0 && errno != EINTR) DT_SYSCHECK(rc, "poll on listening socket");
    if (rc > 0) {
      int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        set_nodelay(fd);
        return Fd(fd);
      }
      if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) DT_SYSCHECK(-1, "accept");
    }
    if (deadline.expired()) return Fd();
  }
}

void write_full(int fd, const void* data, size_t n, const Deadline& deadline, const std::string& what) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno != EAGAIN && errno != EINTR)
      DT_THROW(IoError, what << ": send failed: " << errno_string(errno));
    pollfd pf{fd, POLLOUT, 0};
    int rc = ::poll(&pf, 1, std::min(deadline.remaining_ms(), 1000));
    if (rc == 0 && deadline.expired()) DT_THROW(Timeout, what << ": send timed out");
  }
}

void read_full(int fd, void* data, size_t n, const Deadline& deadline, const std::string& what) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t k = ::recv(fd, p, n, MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k == 0) DT_THROW(IoError, what << ": connection closed by peer");
    if (errno != EAGAIN && errno != EINTR) DT_THROW(IoError, what << ": recv failed: " << errno_string(errno));
    pollfd pf{fd, POLLIN, 0};
    int rc = ::poll(&pf, 1, std::min(deadline.remaining_ms(), 1000));
    if (rc == 0 && deadline.expired()) DT_THROW(Timeout, what << ": receive timed out");
  }
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void set_nonblocking(int fd, bool on) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

std::string tcp_congestion(int fd) {
  char name[64] = {};
  socklen_t len = sizeof name - 1;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) return "";
  return std::string(name, strnlen(name, len));
}

std::string set_tcp_congestion(int fd, const std::string& algorithm) {
  if (::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, algorithm.data(), static_cast<socklen_t>(algorithm.size())) == 0)
    return "";
  const int err = errno;
  std::string why = errno_string(err);
  auto first_line = [](const char* path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
  };
  const std::string available = first_line("/proc/sys/net/ipv4/tcp_available_congestion_control");
  const std::string allowed = first_line("/proc/sys/net/ipv4/tcp_allowed_congestion_control");
  if (!available.empty()) why += "; this kernel has: " + available;
  if (!allowed.empty()) why += "; a process without CAP_NET_ADMIN may use: " + allowed;
  return why;
}

std::string congestion_to_set(const std::string& setting, bool same_host, const std::string& current) {
  if (setting == "system") return "";
  const std::string want = setting == "auto" ? (same_host ? "reno" : "") : setting;
  return want == current ? "" : want;
}

bool peer_on_this_host(int fd) {
  sockaddr_storage mine{}, theirs{};
  socklen_t a = sizeof mine, b = sizeof theirs;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &a) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&theirs), &b) != 0 || mine.ss_family != theirs.ss_family)
    return false;
  if (mine.ss_family == AF_INET) {
    const auto& x = reinterpret_cast<const sockaddr_in&>(mine).sin_addr;
    const auto& y = reinterpret_cast<const sockaddr_in&>(theirs).sin_addr;
    const bool loopback = (ntohl(y.s_addr) >> 24) == 127;
    return loopback || x.s_addr == y.s_addr;
  }
  if (mine.ss_family == AF_INET6) {
    const auto& x = reinterpret_cast<const sockaddr_in6&>(mine).sin6_addr;
    const auto& y = reinterpret_cast<const sockaddr_in6&>(theirs).sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(&y) || std::memcmp(&x, &y, sizeof x) == 0;
  }
  return false;
}

std::string peer_name(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return sockaddr_string(ss);
}

std::string local_name(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return sockaddr_string(ss);
}

std::pair<std::string, int> split_host_port(const std::string& text, const std::string& what) {
  auto colon = text.rfind(':');
  DT_CHECK(colon != std::string::npos && colon + 1 < text.size(), InvalidArgument,
           what << ": '" << text << "' is not HOST:PORT");
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  long port = std::strtol(text.c_str() + colon + 1, &end, 10);
  DT_CHECK(*end == '\0' && port >= 0 && port <= 65535, InvalidArgument,
           what << ": '" << text << "' has a bad port (0-65535)");
  return {host, static_cast<int>(port)};
}

}  // namespace dtrain
