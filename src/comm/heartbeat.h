// comm/heartbeat.h — a rank's sign of life to its launcher.
//
// The launcher (launch/launch.h) gives each rank the write end of a pipe and its descriptor
// number in DTRAIN_HEARTBEAT_FD. A rank that joins the job (Communicator::from_env) starts a
// Heartbeat: a thread that writes one byte to that pipe every `interval_s`. A rank that stops
// beating for the launcher's --heartbeat seconds is frozen: stopped (SIGSTOP), frozen by its
// cgroup, or starved; the launcher reports it by name within seconds instead of letting its
// peers wait for the collective timeout, and restarts the job when asked to.
//
// Contract
// - Heartbeat(fd, interval_s) beats (byte 1) until destroyed; the destructor stops and joins
//   the thread within one interval and writes byte 0: the rank left the job on purpose. A write that fails (the launcher is gone) ends the beating quietly.
// - tell_launcher_a_peer_failed() writes byte 2 ("this rank saw a peer fail") to the pipe,
//   when there is one. The transport calls it the first time it finds a peer gone, so that when
//   a rank and the ranks that noticed its death have all exited before the launcher looks, the
//   launcher blames the rank that failed first, not a witness (launch/launch.h). It does not
//   count as a beat. Safe from any thread; a no-op outside dtrain's launcher.
// - heartbeat_from_env() returns nullptr when DTRAIN_HEARTBEAT_FD is unset (not under dtrain's
//   launcher) and throws InvalidArgument when it is set but not a descriptor number.
// Thread-safety: the object is owned by one thread; its own thread only writes to the pipe.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

namespace dtrain {

class Heartbeat {
 public:
  Heartbeat(int fd, double interval_s);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  void loop();
  int fd_;
  double interval_s_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

std::unique_ptr<Heartbeat> heartbeat_from_env();
void tell_launcher_a_peer_failed();

}  // namespace dtrain
