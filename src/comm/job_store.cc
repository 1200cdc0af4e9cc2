// comm/job_store.cc — the per-run generation of an mpirun/srun job's file store (file_store.h).
//
// ROOT/gen names the current run: "NONCE PID START", PID being its rank 0 and START that
// process's start time (field 22 of /proc/PID/stat), so a recycled pid is not mistaken for a
// live rank 0. The keys live in ROOT/gNONCE. Changes to gen happen under an flock on ROOT.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "base/clock.h"
#include "base/error.h"
#include "base/log.h"
#include "comm/file_store.h"
#include "comm/socket.h"

namespace dtrain {
namespace {

// Start time of a live process, "" when it is gone.
std::string start_time(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto paren = stat.rfind(')');
  if (!in.good() && stat.empty()) return "";
  if (paren == std::string::npos) return "";
  std::istringstream rest(stat.substr(paren + 2));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i == 3 && field == "Z") return "";  // a zombie is gone
  }
  return field;
}

struct Generation {
  std::string nonce;
  long pid = 0;
  std::string start;
  bool alive() const { return pid > 0 && !start.empty() && start_time(pid) == start; }
};

bool read_generation(const std::string& root, Generation* g) {
  std::ifstream in(root + "/gen");
  return static_cast<bool>(in >> g->nonce >> g->pid >> g->start) && g->nonce.find('/') == std::string::npos;
}

// Removes a generation directory (flat: key files only).
void remove_generation(const std::string& root, const std::string& nonce) {
  std::string dir = root + "/g" + nonce;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") ::unlink((dir + "/" + name).c_str());
    }
    ::closedir(d);
  }
  ::rmdir(dir.c_str());
}

class RootLock {
 public:
  explicit RootLock(const std::string& root) : fd_(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) {
    DT_CHECK(fd_.valid(), IoError, "file store: cannot open " << root << ": " << errno_string(errno));
    DT_SYSCHECK(::flock(fd_.get(), LOCK_EX), "file store: flock " << root);
  }
  ~RootLock() { ::flock(fd_.get(), LOCK_UN); }

 private:
  Fd fd_;
};

// The job's store: a FileStore in this run's generation that, when the last rank lets go of
// it, removes the generation and the job directory.
class JobFileStore : public FileStore {
 public:
  JobFileStore(std::string root, std::string nonce, int size, double timeout_s)
      : FileStore(root + "/g" + nonce, timeout_s), root_(std::move(root)), nonce_(std::move(nonce)), size_(size) {}
  ~JobFileStore() override {
    try {
      if (add("job/left", 1) < size_) return;
      RootLock lock(root_);
      Generation g;
      if (read_generation(root_, &g) && g.nonce == nonce_) ::unlink((root_ + "/gen").c_str());
      remove_generation(root_, nonce_);
    } catch (const std::exception& e) {
      DT_LOG(Warn) << "file store: could not clean up " << root_ << ": " << e.what();
      return;
    }
    ::rmdir(root_.c_str());  // fails (harmlessly) while another run uses it
  }

 private:
  std::string root_, nonce_;
  int size_;
};

}  // namespace

std::shared_ptr<Store> open_job_file_store(const std::string& root, int rank, int size, double timeout_s) {
  ensure_private_dir(root, "file store of rank " + std::to_string(rank));
  std::string self_start = start_time(::getpid());
  if (rank == 0) {
    RootLock lock(root);
    Generation old;
    if (read_generation(root, &old)) {
      DT_CHECK(!old.alive() || old.pid == ::getpid(), InvalidArgument,
               "rank 0: another job with the same job and step ids is running on this host (its rank 0 is pid "
                   << old.pid << ", rendezvous directory " << root << "); job ids must be unique per run");
      remove_generation(root, old.nonce);  // a dead run's keys
    }
    std::random_device rd;
    std::ostringstream nonce;
    nonce << std::hex << rd() << rd() << rd();
    ensure_private_dir(root + "/g" + nonce.str(), "file store of rank 0");
    std::string tmp = root + "/.gen" + std::to_string(::getpid());
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << nonce.str() << " " << ::getpid() << " " << self_start << "\n";
      DT_CHECK(out.good(), IoError, "file store: cannot write " << tmp);
    }
    DT_SYSCHECK(::rename(tmp.c_str(), (root + "/gen").c_str()), "file store: publish " << root << "/gen");
    return std::make_shared<JobFileStore>(root, nonce.str(), size, timeout_s);
  }
  // Other ranks join the generation of a live rank 0, never a dead run's.
  Deadline deadline = Deadline::after(timeout_s);
  int sleep_us = 100;
  for (;;) {
    Generation g;
    if (read_generation(root, &g) && g.alive()) {
      struct stat st {};
      if (::stat((root + "/g" + g.nonce).c_str(), &st) == 0)
        return std::make_shared<JobFileStore>(root, g.nonce, size, timeout_s);
    }
    if (deadline.expired())
      DT_THROW(Timeout, "rank " << rank << ": no live rank 0 of this job published its rendezvous in " << root
                                << " within " << timeout_s << " s (did rank 0 start? is it on this host? for ranks on "
                                << "several hosts set MASTER_ADDR, MASTER_PORT and DTRAIN_TOKEN)");
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));  // polling a file system
    sleep_us = std::min(sleep_us * 2, 20000);
  }
}

}  // namespace dtrain
