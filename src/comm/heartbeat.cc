#include "comm/heartbeat.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "base/env.h"
#include "base/error.h"

namespace dtrain {

Heartbeat::Heartbeat(int fd, double interval_s) : fd_(fd), interval_s_(interval_s), thread_([this] { loop(); }) {}

Heartbeat::~Heartbeat() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  const char left = 0;  // "left the job on purpose": the launcher stops expecting beats
  ssize_t ignored = ::write(fd_, &left, 1);
  (void)ignored;
}

void Heartbeat::loop() {
  const auto interval = std::chrono::duration<double>(interval_s_);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    const char beat = 1;
    if (::write(fd_, &beat, 1) != 1 && errno != EAGAIN && errno != EINTR) return;  // launcher gone
    cv_.wait_for(lock, interval, [this] { return stop_; });
  }
}

std::unique_ptr<Heartbeat> heartbeat_from_env() {
  const auto v = env_get("DTRAIN_HEARTBEAT_FD");
  if (!v) return nullptr;
  const int fd = static_cast<int>(env_int("DTRAIN_HEARTBEAT_FD", -1));
  DT_CHECK(fd >= 0 && ::fcntl(fd, F_GETFD) != -1, InvalidArgument,
           "DTRAIN_HEARTBEAT_FD=" << *v << " is not an open descriptor; it is set by dtrain's launcher for its ranks");
  // Not inherited by programs this rank starts, and never blocking the rank.
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return std::make_unique<Heartbeat>(fd, 0.25);
}

void tell_launcher_a_peer_failed() {
  // Read from the environment each time: a failure path, and no process-wide state. One byte
  // to a pipe is atomic, so this never interleaves with the heartbeat thread's beats.
  const char* v = std::getenv("DTRAIN_HEARTBEAT_FD");
  if (!v || !*v) return;
  char* end = nullptr;
  const long fd = std::strtol(v, &end, 10);
  if (*end != '\0' || fd < 0 || ::fcntl(static_cast<int>(fd), F_GETFD) == -1) return;
  const char witness = 2;
  ssize_t ignored = ::write(static_cast<int>(fd), &witness, 1);
  (void)ignored;
}

}  // namespace dtrain
