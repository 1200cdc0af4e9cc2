#include "comm/file_store.h"

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
#include "comm/socket.h"

namespace dtrain {

FileStore::FileStore(std::string dir, double timeout_s) : Store(timeout_s), dir_(std::move(dir)) {
  DT_CHECK(!dir_.empty(), InvalidArgument, "file store: empty directory name");
  ensure_private_dir(dir_, "file store");
}

void ensure_private_dir(const std::string& dir, const std::string& what) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    DT_THROW(IoError, what << ": cannot create directory " << dir << ": " << errno_string(errno));
  struct stat st {};
  DT_CHECK(::lstat(dir.c_str(), &st) == 0, IoError, what << ": cannot stat " << dir << ": " << errno_string(errno));
  DT_CHECK(!S_ISLNK(st.st_mode), InvalidArgument,
           what << ": " << dir << " is a symbolic link; refusing to use it (remove it: someone may be redirecting "
                << "the job's rendezvous)");
  DT_CHECK(S_ISDIR(st.st_mode), InvalidArgument, what << ": " << dir << " exists and is not a directory (remove it)");
  DT_CHECK(st.st_uid == ::getuid(), InvalidArgument,
           what << ": " << dir << " belongs to uid " << st.st_uid << ", not to this user (uid " << ::getuid()
                << "); refusing to use it (remove it or choose another directory)");
  DT_CHECK((st.st_mode & 022) == 0, InvalidArgument,
           what << ": " << dir << " is writable by group or others (mode " << std::oct << (st.st_mode & 0777) << std::dec
                << "); make it private: chmod 700 " << dir);
}

std::string FileStore::path(const std::string& key) const {
  static const char* hex = "0123456789abcdef";
  std::string name;
  for (unsigned char c : key) {
    name += hex[c >> 4];
    name += hex[c & 15];
  }
  return dir_ + "/k" + name;
}

bool FileStore::read(const std::string& key, std::string* value) const {
  std::ifstream in(path(key), std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *value = ss.str();
  return true;
}

void FileStore::set(const std::string& key, const std::string& value) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string tmp = dir_ + "/.tmp" + std::to_string(::getpid()) + "_" + std::to_string(rng());
  {
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    DT_CHECK(fd.valid(), IoError, "file store: cannot write " << tmp << ": " << errno_string(errno));
    size_t off = 0;
    while (off < value.size()) {
      ssize_t k = ::write(fd.get(), value.data() + off, value.size() - off);
      DT_SYSCHECK(k, "file store: write " << tmp);
      off += static_cast<size_t>(k);
    }
  }
  DT_SYSCHECK(::rename(tmp.c_str(), path(key).c_str()), "file store: rename into " << path(key));
}

std::string FileStore::get(const std::string& key, double timeout_s) {
  wait({key}, timeout_s);
  std::string v;
  DT_CHECK(read(key, &v), IoError, "file store: key '" << key << "' vanished while reading");
  return v;
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  std::string lock_path = dir_ + "/.lock";
  Fd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  DT_CHECK(lock.valid(), IoError, "file store: cannot open " << lock_path << ": " << errno_string(errno));
  DT_SYSCHECK(::flock(lock.get(), LOCK_EX), "file store: flock " << lock_path);
  std::string v;
  int64_t value;
  try {
    value = checked_add(key, read(key, &v) ? &v : nullptr, delta);
  } catch (...) {
    ::flock(lock.get(), LOCK_UN);
    throw;
  }
  set(key, std::to_string(value));
  ::flock(lock.get(), LOCK_UN);
  return value;
}

void FileStore::wait(const std::vector<std::string>& keys, double timeout_s) {
  double t = resolve(timeout_s);
  Deadline deadline = Deadline::after(t);
  int sleep_us = 100;
  for (;;) {
    std::vector<std::string> missing;
    for (const auto& k : keys)
      if (::access(path(k).c_str(), F_OK) != 0) missing.push_back(k);
    if (missing.empty()) return;
    if (deadline.expired()) DT_THROW(Timeout, missing_keys_message(missing, t));
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));  // polling a file system
    sleep_us = std::min(sleep_us * 2, 20000);
  }
}

bool FileStore::check(const std::vector<std::string>& keys) {
  for (const auto& k : keys)
    if (::access(path(k).c_str(), F_OK) != 0) return false;
  return true;
}

bool FileStore::remove(const std::string& key) { return ::unlink(path(key).c_str()) == 0; }

}  // namespace dtrain
