// cli/launch.cc — the launcher: fork N ranks, serve their rendezvous, watch them, stop them.
//
// The launcher hosts the TCP store (node 0 of a multi-node job hosts it at --master) so the
// ranks rendezvous without any of them being special. Each rank runs in its own process group
// with its stdout/stderr on pipes; one poll loop reads the pipes (prefixing whole lines with
// the rank), a signalfd (SIGCHLD: a rank ended; SIGINT/SIGTERM: forward to every rank) and a
// timer for the kill grace period. The first rank to fail decides the job: the others get
// SIGTERM, then SIGKILL after the grace period, and the report names that rank.
#include "launch/launch.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <sstream>

#include "base/clock.h"
#include "base/env.h"
#include "base/error.h"
#include "comm/engine.h"
#include "comm/pmix_exchange.h"
#include "base/settings.h"
#include "comm/socket.h"
#include "comm/tcp_store.h"
#include "comm/world.h"

extern char** environ;

namespace dtrain::launch {
namespace {

// How long a failure that only saw a peer fail waits for the peer's own exit to be reaped
// before it is blamed (Launcher::reap).
constexpr double kWitnessGraceS = 2.0;

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// Blocks SIGCHLD, SIGINT and SIGTERM for the scope; restores the previous mask.
struct SignalBlock {
  sigset_t mask, old;
  SignalBlock() {
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    ::pthread_sigmask(SIG_BLOCK, &mask, &old);
  }
  ~SignalBlock() { ::pthread_sigmask(SIG_SETMASK, &old, nullptr); }
};

struct Rank {
  int global = 0, local = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;
  Fd out, err, beat;      // beat: the heartbeat pipe's read end
  bool beating = false;   // the rank's heartbeat is on (it joined the job and has not left)
  bool witness = false;   // it reported seeing a peer fail (heartbeat byte 2)
  double last_beat = 0;
  double stopped_since = -1;  // the kernel reported it stopped (SIGSTOP) at this time
  std::string hung;           // why the launcher declared it hung ("" if not)
  std::string out_partial, err_partial;
  std::deque<std::string> err_tail;  // last lines of stderr, for the failure report
  cpu_set_t cpus;                     // bound to these when `bound`
  bool bound = false;
};

// Ranks that fit the CPUs this launcher may use get CPUs of their own (rank l the l-th
// share of cpus/nproc of them), as mpirun binds by default; DTRAIN_BIND=0 turns it off.
// Unbound, the scheduler's wake-up placement now and then leaves two ranks on one core,
// where they spin against each other: an 8-byte all-reduce of 2 ranks took 2-5 us in such
// runs instead of 0.4. One rank per node, or more ranks than CPUs, stay unbound.
void plan_binding(std::vector<Rank>& ranks) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (!Settings::process().flag("DTRAIN_BIND") || ::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  const size_t n = ranks.size();
  if (n < 2 || n > cpus.size()) return;
  const size_t k = cpus.size() / n;
  for (size_t l = 0; l < n; ++l) {
    CPU_ZERO(&ranks[l].cpus);
    for (size_t j = l * k; j < (l + 1) * k; ++j) CPU_SET(cpus[j], &ranks[l].cpus);
    ranks[l].bound = true;
  }
}

// The job's rendezvous: node 0's store, served by its launcher for every attempt (a
// restarted job meets in a fresh key space, DTRAIN_RESTART), and the secret the ranks present.
struct Rendezvous {
  std::unique_ptr<TcpStoreServer> server;
  std::string token, host, store_url;
  int port = 0;
};

Rendezvous make_rendezvous(const LaunchOptions& o_) {
  Rendezvous rv;
  const Settings& settings = Settings::process();
  std::string token = o_.token.empty() && settings.has("DTRAIN_TOKEN") ? settings.text("DTRAIN_TOKEN") : o_.token;
  std::unique_ptr<TcpStoreServer> server;
  std::string host;
  int port;
  if (o_.nnodes == 1 && o_.master.empty()) {
    if (token.empty()) token = fresh_token();
    server = std::make_unique<TcpStoreServer>("127.0.0.1", 0, token);
    host = "127.0.0.1";
    port = server->port();
  } else {
    DT_CHECK(!o_.master.empty(), InvalidArgument, "--nnodes " << o_.nnodes << " needs --master HOST:PORT (node 0's address)");
    DT_CHECK(!token.empty(), InvalidArgument,
             "a multi-node job needs the same secret on every node: export DTRAIN_TOKEN=... (e.g. $(openssl rand -hex 16)) "
             "or pass --token");
    std::tie(host, port) = split_host_port(o_.master, "--master");
    DT_CHECK(port > 0, InvalidArgument, "--master needs a fixed port (got " << o_.master << ")");
    if (o_.node_rank == 0) server = std::make_unique<TcpStoreServer>(host, port, token);
  }
  bool v6 = host.find(':') != std::string::npos;
  std::string store_url = "tcp://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
  rv.token = token;
  rv.host = host;
  rv.port = port;
  rv.store_url = store_url;
  rv.server = std::move(server);
  return rv;
}

class Launcher {
 public:
  Launcher(const LaunchOptions& o, std::vector<std::string> argv, int attempt, const Rendezvous& rv)
      : o_(o), argv_(std::move(argv)), attempt_(attempt), rv_(rv) {}
  int run();
  bool interrupted() const { return interrupted_ != 0; }

 private:
  void start(Rank& r, std::vector<std::string> env);
  std::vector<std::string> rank_env(int l);
  void pump(Rank& r, bool is_err, bool flush_all);
  void emit(Rank& r, bool is_err, const std::string& line);
  void reap();
  void blame_witness_if_due(bool now);
  void read_beats(Rank& r);
  void check_hung();
  void fail(size_t i);
  void signal_all(int sig);

  LaunchOptions o_;
  std::vector<std::string> argv_;
  int attempt_;
  const Rendezvous& rv_;
  int torch_port_ = 0;  // MASTER_PORT: torch.distributed's rendezvous, beside dtrain's store
  std::vector<Rank> ranks_;
  int failed_ = -1;  // index into ranks_ of the first failure
  // A failed rank that only saw a peer fail (a witness), not yet blamed: the culprit may
  // still be exiting (reaped late: many threads, much memory to unmap). Blamed at blame_at_
  // unless a failure that is not a witness is reaped first.
  int witness_failed_ = -1;
  Deadline blame_at_ = Deadline::never();
  int interrupted_ = 0;
  Deadline kill_at_ = Deadline::never();
  bool killing_ = false;
};

void Launcher::start(Rank& r, std::vector<std::string> env) {
  int out[2], err[2], beat[2];
  DT_SYSCHECK(::pipe2(out, O_CLOEXEC), "pipe");
  DT_SYSCHECK(::pipe2(err, O_CLOEXEC), "pipe");
  DT_SYSCHECK(::pipe2(beat, O_CLOEXEC), "pipe");
  env.push_back("DTRAIN_HEARTBEAT_FD=" + std::to_string(beat[1]));
  std::vector<char*> cargv, cenv;
  for (auto& a : argv_) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  const pid_t launcher = ::getpid();
  pid_t pid = ::fork();
  DT_SYSCHECK(pid, "fork rank " << r.global);
  if (pid == 0) {
    // A rank dies with its launcher, even one killed with SIGKILL (which cannot pass anything
    // on): the kernel sends it SIGKILL when the launcher is gone.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != launcher) ::_exit(127);  // the launcher died before prctl
    ::setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::fcntl(beat[1], F_SETFD, 0);  // the heartbeat pipe survives exec
    if (r.bound) ::sched_setaffinity(0, sizeof r.cpus, &r.cpus);  // best effort; inherited by exec
    ::execvpe(cargv[0], cargv.data(), cenv.data());
    std::string msg = "dtrain run: cannot execute '" + argv_[0] + "': " + errno_string(errno) + "\n";
    ssize_t ignored = ::write(2, msg.data(), msg.size());
    (void)ignored;
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(out[1]);
  ::close(err[1]);
  ::close(beat[1]);
  r.out = Fd(out[0]);
  r.err = Fd(err[0]);
  r.beat = Fd(beat[0]);
  set_nonblocking(r.out.get(), true);
  set_nonblocking(r.err.get(), true);
  set_nonblocking(r.beat.get(), true);
  r.pid = pid;
  r.running = true;
}

void Launcher::emit(Rank& r, bool is_err, const std::string& line) {
  if (is_err) {
    r.err_tail.push_back(line);
    if (r.err_tail.size() > 20) r.err_tail.pop_front();
  }
  std::string text = o_.tag_output ? "[rank " + std::to_string(r.global) + "] " + line + "\n" : line + "\n";
  ssize_t ignored = ::write(is_err ? 2 : 1, text.data(), text.size());
  (void)ignored;
}

// Reads what a rank wrote and passes on whole lines (all of it when flush_all: EOF).
void Launcher::pump(Rank& r, bool is_err, bool flush_all) {
  Fd& fd = is_err ? r.err : r.out;
  std::string& partial = is_err ? r.err_partial : r.out_partial;
  if (!fd.valid()) return;
  char buf[65536];
  for (;;) {
    ssize_t k = ::read(fd.get(), buf, sizeof buf);
    if (k > 0) {
      partial.append(buf, static_cast<size_t>(k));
      continue;
    }
    if (k == 0) {
      fd.reset();
      flush_all = true;
    }
    break;
  }
  size_t start = 0;
  for (size_t nl; (nl = partial.find('\n', start)) != std::string::npos; start = nl + 1)
    emit(r, is_err, partial.substr(start, nl - start));
  partial.erase(0, start);
  if (flush_all && !partial.empty()) {
    emit(r, is_err, partial);
    partial.clear();
  }
}

void Launcher::signal_all(int sig) {
  for (auto& r : ranks_)
    if (r.running) {
      ::kill(-r.pid, sig);
      if (sig == SIGTERM) ::kill(-r.pid, SIGCONT);  // a stopped rank must run to see SIGTERM
    }
}

void Launcher::fail(size_t i) {
  if (failed_ >= 0 || interrupted_) return;
  failed_ = static_cast<int>(i);
  if (!killing_) {
    killing_ = true;
    signal_all(SIGTERM);
    kill_at_ = Deadline::after(o_.grace_s);
  }
}

void Launcher::reap() {
  std::vector<size_t> batch;  // the ranks found failed in this pass, in the order reaped
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG | WUNTRACED | WCONTINUED);
    if (pid <= 0) break;
    for (size_t i = 0; i < ranks_.size(); ++i) {
      Rank& r = ranks_[i];
      if (r.pid != pid) continue;
      if (WIFSTOPPED(status)) {
        r.stopped_since = now_seconds();
        continue;
      }
      if (WIFCONTINUED(status)) {
        r.stopped_since = -1;
        r.last_beat = now_seconds();
        continue;
      }
      r.running = false;
      r.status = status;
      bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!ok) {
        read_beats(r);  // a witness byte it wrote before exiting is in the pipe now
        batch.push_back(i);
      }
    }
  }
  // Ranks that exited between two looks arrive together, in no useful order. A rank that
  // failed because a peer died says so on its heartbeat pipe; the culprit is the first
  // failure of the batch that is not such a witness. A batch of witnesses only waits
  // kWitnessGraceS for the culprit: a process is reaped only once all its threads are gone,
  // so a witness that exits at once can be reaped before the rank whose death it saw (the
  // multi-process test's ranks did so on a loaded machine). Then the first witness is blamed.
  auto culprit = std::find_if(batch.begin(), batch.end(), [&](size_t i) { return !ranks_[i].witness; });
  if (culprit != batch.end()) {
    fail(*culprit);
  } else if (!batch.empty() && witness_failed_ < 0) {
    witness_failed_ = static_cast<int>(batch.front());
    blame_at_ = Deadline::after(kWitnessGraceS);
  }
}

void Launcher::blame_witness_if_due(bool now) {
  if (witness_failed_ >= 0 && failed_ < 0 && (now || blame_at_.expired())) fail(static_cast<size_t>(witness_failed_));
}

// Heartbeat bytes: 1 = alive, 0 = the rank left the job on purpose (its Communicator is gone),
// 2 = it saw a peer fail (a witness: not a beat, and not to be blamed before the peer).
void Launcher::read_beats(Rank& r) {
  if (!r.beat.valid()) return;
  char buf[256];
  for (;;) {
    ssize_t k = ::read(r.beat.get(), buf, sizeof buf);
    if (k > 0) {
      for (ssize_t j = 0; j < k; ++j) {
        if (buf[j] == 2) {
          r.witness = true;
          continue;
        }
        r.last_beat = now_seconds();
        r.beating = buf[j] != 0;
      }
      continue;
    }
    if (k == 0) r.beat.reset();
    return;
  }
}

void Launcher::check_hung() {
  if (o_.heartbeat_s <= 0 || killing_) return;
  const double now = now_seconds();
  for (size_t i = 0; i < ranks_.size(); ++i) {
    Rank& r = ranks_[i];
    if (!r.running) continue;
    std::ostringstream why;
    const bool silent = r.beating && now - r.last_beat > o_.heartbeat_s;
    if (r.stopped_since >= 0 && (silent || now - r.stopped_since > o_.heartbeat_s)) {
      why << "has been stopped (SIGSTOP) for " << static_cast<int>(now - r.stopped_since + 0.5) << " s";
    } else if (silent) {
      why << "sent no heartbeat for " << static_cast<int>(now - r.last_beat)
          << " s (frozen, stopped or starved; --heartbeat " << o_.heartbeat_s << ")";
    } else {
      continue;
    }
    r.hung = why.str();
    fail(i);
    return;
  }
}

// The environment of local rank l: this launcher's, plus the job's variables (torchrun's
// names, DTRAIN_STORE/TOKEN/TRANSPORT/TIMEOUT/RESTART, thread counts).
std::vector<std::string> Launcher::rank_env(int l) {
  const std::string& token = rv_.token;
  const std::string& host = rv_.host;
  const std::string& store_url = rv_.store_url;
  const int world = o_.nnodes * o_.nproc;
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  const std::string threads = std::to_string(std::max<long>(1, cpus / o_.nproc));
  Rank& r = ranks_[static_cast<size_t>(l)];
  r.local = l;
  r.global = o_.node_rank * o_.nproc + l;
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  env["RANK"] = std::to_string(r.global);
  env["LOCAL_RANK"] = std::to_string(l);
  env["WORLD_SIZE"] = std::to_string(world);
  env["LOCAL_WORLD_SIZE"] = std::to_string(o_.nproc);
  env["GROUP_RANK"] = std::to_string(o_.node_rank);
  env["MASTER_ADDR"] = host;
  env["MASTER_PORT"] = std::to_string(torch_port_);
  env["DTRAIN_STORE"] = store_url;
  env["DTRAIN_TOKEN"] = token;
  env["DTRAIN_TRANSPORT"] = o_.transport;
  if (!o_.bind_addr.empty()) env["DTRAIN_BIND_ADDR"] = o_.bind_addr;
  std::ostringstream t;
  t << o_.timeout_s;
  env["DTRAIN_TIMEOUT"] = t.str();
  env["DTRAIN_RESTART"] = std::to_string(attempt_);
  if (attempt_ > 0 && o_.nnodes > 1 && !env.count("DTRAIN_CONNECT_TIMEOUT")) {
    // The other nodes notice the failure up to one timeout later and stop their ranks
    // within the grace period: a restarted rank waits that long for them at the rendezvous.
    std::ostringstream c;
    c << 3 * o_.timeout_s + o_.grace_s;
    env["DTRAIN_CONNECT_TIMEOUT"] = c.str();
  }
  if (!env.count("OMP_NUM_THREADS")) env["OMP_NUM_THREADS"] = threads;
  if (!env.count("OPENBLAS_NUM_THREADS")) env["OPENBLAS_NUM_THREADS"] = threads;
  std::vector<std::string> list;
  for (auto& [k, v] : env) list.push_back(k + "=" + v);
  return list;
}

int Launcher::run() {
  SignalBlock blocked;  // already blocked by launch(); this gives the mask for the signalfd
  const int world = o_.nnodes * o_.nproc;

  Fd sfd(::signalfd(-1, &blocked.mask, SFD_CLOEXEC | SFD_NONBLOCK));
  DT_SYSCHECK(sfd.get(), "signalfd");

  ranks_.resize(o_.nproc);
  plan_binding(ranks_);
  // MASTER_PORT is for torch.distributed's own rendezvous (its rank 0 listens on it), so it
  // must not be the dtrain store's port: a free loopback port per attempt, as torchrun picks
  // one; multi-node, the --master port + 1 (the same on every node).
  torch_port_ = rv_.port + 1;
  if (o_.nnodes == 1 && o_.master.empty()) listen_tcp(rv_.host, 0, &torch_port_);  // closed at once
  try {
    for (int l = 0; l < o_.nproc; ++l) start(ranks_[static_cast<size_t>(l)], rank_env(l));
  } catch (...) {
    signal_all(SIGKILL);  // no rank outlives a launcher that could not start them all
    for (auto& r : ranks_)
      if (r.running) ::waitpid(r.pid, nullptr, 0);
    throw;
  }

  for (;;) {
    bool any_running = false, any_pipe = false;
    for (auto& r : ranks_) {
      any_running |= r.running;
      any_pipe |= r.out.valid() || r.err.valid();
    }
    if (!any_running && !any_pipe) break;
    std::vector<pollfd> fds{{sfd.get(), POLLIN, 0}};
    for (auto& r : ranks_) {
      if (r.out.valid()) fds.push_back({r.out.get(), POLLIN, 0});
      if (r.err.valid()) fds.push_back({r.err.get(), POLLIN, 0});
      if (r.beat.valid() && r.running) fds.push_back({r.beat.get(), POLLIN, 0});
    }
    int timeout = killing_ ? std::max(1, std::min(kill_at_.remaining_ms(), 200)) : o_.heartbeat_s > 0 ? 250 : 1000;
    if (witness_failed_ >= 0 && failed_ < 0) timeout = std::max(1, std::min(timeout, blame_at_.remaining_ms()));
    // Once every rank is gone, give stray holders of the pipes (a rank's children) 1 s.
    if (!any_running) timeout = 1000;
    int rc = ::poll(fds.data(), fds.size(), timeout);
    if (rc == 0 && !any_running) break;
    signalfd_siginfo si;
    while (::read(sfd.get(), &si, sizeof si) == sizeof si) {
      if (si.ssi_signo == SIGINT || si.ssi_signo == SIGTERM) {
        interrupted_ = static_cast<int>(si.ssi_signo);
        signal_all(static_cast<int>(si.ssi_signo));
        if (!killing_) {
          killing_ = true;
          kill_at_ = Deadline::after(o_.grace_s);
        }
      }
    }
    for (auto& r : ranks_) {
      pump(r, false, false);
      pump(r, true, false);
      read_beats(r);
    }
    reap();
    blame_witness_if_due(false);
    check_hung();
    if (killing_ && kill_at_.expired()) signal_all(SIGKILL);
  }
  blame_witness_if_due(true);
  if (failed_ >= 0) {
    Rank& r = ranks_[failed_];
    std::ostringstream os;
    os << "dtrain run: rank " << r.global << " (pid " << r.pid << ") ";
    if (!r.hung.empty()) os << r.hung << ": hung";
    else if (WIFSIGNALED(r.status)) os << "was killed by " << signal_name(WTERMSIG(r.status));
    else os << "exited with code " << WEXITSTATUS(r.status);
    os << "; stopped the other " << (world - 1) << " rank" << (world == 2 ? "" : "s") << ".\n";
    if (!r.err_tail.empty()) {
      os << "last lines of rank " << r.global << "'s stderr:\n";
      for (auto& l : r.err_tail) os << "  | " << l << "\n";
    }
    std::string s = os.str();
    ssize_t ignored = ::write(2, s.data(), s.size());
    (void)ignored;
    if (!r.hung.empty()) return 1;
    if (WIFSIGNALED(r.status)) return 128 + WTERMSIG(r.status);
    return WEXITSTATUS(r.status) ? WEXITSTATUS(r.status) : 1;
  }
  if (interrupted_) {
    std::string s = "dtrain run: interrupted by " + signal_name(interrupted_) + "; stopped every rank.\n";
    ssize_t ignored = ::write(2, s.data(), s.size());
    (void)ignored;
    return 128 + interrupted_;
  }
  return 0;
}

// Inside an sbatch script whose allocation spans several hosts the allocation is the job:
// its ranks are started by srun across it (rendezvous through PMIx when built, else a fresh
// DTRAIN_TOKEN and the store on the step's first host, comm/world.h). Replaces this process.
int launch_through_srun(const LaunchOptions& o, const std::vector<std::string>& argv) {
  std::vector<std::string> cmd{"srun", "--ntasks=" + std::to_string(o.nproc), "--kill-on-bad-exit=1"};
  if (pmix_built()) cmd.push_back("--mpi=pmix");
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  ::setenv("DTRAIN_TRANSPORT", o.transport.c_str(), 1);
  ::setenv("DTRAIN_TIMEOUT", std::to_string(o.timeout_s).c_str(), 1);
  if (!o.bind_addr.empty()) ::setenv("DTRAIN_BIND_ADDR", o.bind_addr.c_str(), 1);
  if (!pmix_built() && !env_get("DTRAIN_TOKEN")) ::setenv("DTRAIN_TOKEN", fresh_token().c_str(), 1);
  std::string msg = "dtrain run: the allocation spans " + env_string("SLURM_JOB_NUM_NODES", "?") + " hosts (" +
                    env_string("SLURM_JOB_NODELIST", "") + "): starting " + std::to_string(o.nproc) + " ranks with srun\n";
  ssize_t ignored = ::write(2, msg.data(), msg.size());
  (void)ignored;
  std::vector<char*> c;
  for (auto& a : cmd) c.push_back(const_cast<char*>(a.c_str()));
  c.push_back(nullptr);
  ::execvp("srun", c.data());
  DT_THROW(IoError, "cannot execute srun to start the ranks across the allocation: " << errno_string(errno)
                                                                                      << " (is SLURM's srun on PATH?)");
}

}  // namespace

int launch(const LaunchOptions& opts, const std::vector<std::string>& argv) {
  DT_CHECK(opts.max_restarts >= 0 && opts.max_restarts <= 1000, InvalidArgument,
           "--max-restarts must be between 0 and 1000, got " << opts.max_restarts);
  DT_CHECK(opts.heartbeat_s >= 0 && opts.heartbeat_s <= 1e6, InvalidArgument,
           "--heartbeat must be between 0 (off) and 1e6 seconds, got " << opts.heartbeat_s);
  DT_CHECK(opts.nproc >= 1, InvalidArgument, "-n must be at least 1 (got " << opts.nproc << ")");
  DT_CHECK(opts.nnodes >= 1 && opts.node_rank >= 0 && opts.node_rank < opts.nnodes, InvalidArgument,
           "--node-rank " << opts.node_rank << " is outside --nnodes " << opts.nnodes);
  DT_CHECK(!argv.empty(), InvalidArgument, "no program to run: put it after '--' (dtrain run -n 4 -- ./train)");
  if (opts.nnodes == 1 && opts.master.empty() && in_slurm_batch_step() && env_int("SLURM_JOB_NUM_NODES", 1) > 1)
    return launch_through_srun(opts, argv);
  // Each local rank costs the launcher about four descriptors (three pipes, its store
  // connection): raise the soft limit as far as the hard one allows, or refuse up front rather
  // than fail half-way through starting the ranks.
  rlimit lim{};
  const rlim_t need = static_cast<rlim_t>(4 * opts.nproc + 64);
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < need) {
    lim.rlim_cur = lim.rlim_max == RLIM_INFINITY ? need : std::min(need, lim.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &lim);
    DT_CHECK(lim.rlim_cur >= need, InvalidArgument,
             "-n " << opts.nproc << " needs about " << need << " open files in the launcher but the limit is "
                   << lim.rlim_cur << " (ulimit -n); raise it or start fewer ranks per node");
  }
  // Block the signals the launcher handles before any thread exists (the store server's
  // thread inherits the mask), so they arrive only on its signalfd; ranks unblock them.
  SignalBlock blocked;
  const Rendezvous rv = make_rendezvous(opts);
  for (int attempt = 0;; ++attempt) {
    Launcher l(opts, argv, attempt, rv);
    const int rc = l.run();
    if (rc == 0 || l.interrupted() || attempt >= opts.max_restarts) return rc;
    const std::string msg = "dtrain run: restart " + std::to_string(attempt + 1) + " of " +
                            std::to_string(opts.max_restarts) +
                            ": starting every rank again (they resume from their checkpoints)\n";
    ssize_t ignored = ::write(2, msg.data(), msg.size());
    (void)ignored;
  }
}

int relaunch_self(const LaunchOptions& opts, const std::vector<std::string>& args) {
  char path[4096];
  ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  DT_SYSCHECK(n, "readlink /proc/self/exe");
  path[n] = '\0';
  std::vector<std::string> argv{path};
  argv.insert(argv.end(), args.begin(), args.end());
  return launch(opts, argv);
}

int relaunch_command(const LaunchOptions& opts, const std::vector<std::string>& words,
                     const std::vector<std::string>& args) {
  std::vector<std::string> all = words;
  all.insert(all.end(), args.begin(), args.end());
  return relaunch_self(opts, all);
}

bool inside_launched_rank() {
  for (const char* v : {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"})
    if (env_get(v)) return true;
  // An sbatch script has SLURM_PROCID=0 too, but it is the allocation's launcher, not a rank.
  return env_get("SLURM_PROCID") && !in_slurm_batch_step();
}

}  // namespace dtrain::launch
