#include "comm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sstream>

#include "base/error.h"
#include "comm/heartbeat.h"

namespace dtrain {

ShmSegment create_shm_segment(size_t bytes, const std::string& label) {
  ShmSegment s;
  s.fd = Fd(::memfd_create(label.c_str(), MFD_CLOEXEC));
  DT_CHECK(s.fd.valid(), IoError, "shm: cannot create a shared-memory segment (" << label << "): " << errno_string(errno));
  if (::ftruncate(s.fd.get(), static_cast<off_t>(bytes)) != 0)
    DT_THROW(IoError, "shm: cannot size " << label << " to " << bytes << " bytes: " << errno_string(errno)
                                          << " (is there enough memory? lower DTRAIN_SHM_RING_BYTES)");
  struct stat st {};
  DT_SYSCHECK(::fstat(s.fd.get(), &st), "shm: fstat " << label);
  std::ostringstream h;
  h << ::getpid() << " " << s.fd.get() << " " << st.st_dev << " " << st.st_ino;
  s.handle = h.str();
  return s;
}

Fd open_shm_segment(const std::string& handle, size_t bytes, const std::string& who, int peer) {
  std::istringstream in(handle);
  long pid = 0, fdnum = -1;
  unsigned long long dev = 0, ino = 0;
  DT_CHECK(static_cast<bool>(in >> pid >> fdnum >> dev >> ino), IoError,
           "shm: " << who << " published a malformed segment handle '" << handle << "'");
  std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fdnum);
  Fd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd.valid()) {
    int err = errno;
    if (err == ENOENT) {
      tell_launcher_a_peer_failed();
      throw PeerFailure("shm: " + who + " (pid " + std::to_string(pid) +
                            ") is gone before its segment could be mapped (it exited during setup; ranks on "
                            "different hosts? use --transport tcp)",
                        peer);
    }
    DT_THROW(IoError, "shm: cannot open " << who << "'s segment " << path << ": " << errno_string(err)
                                         << " (all ranks must run as the same user on one host)");
  }
  struct stat st {};
  DT_SYSCHECK(::fstat(fd.get(), &st), "shm: fstat " << path);
  DT_CHECK(static_cast<unsigned long long>(st.st_dev) == dev && static_cast<unsigned long long>(st.st_ino) == ino,
           IoError,
           "shm: " << path << " is not " << who << "'s segment (a stale handle, or ranks on different hosts: use "
                   << "--transport tcp)");
  DT_CHECK(static_cast<size_t>(st.st_size) == bytes, InvalidArgument,
           "shm: " << who << "'s segment has " << st.st_size << " bytes, this rank expects " << bytes
                   << " (the ranks disagree on the group or on DTRAIN_SHM_RING_BYTES: set it alike everywhere)");
  return fd;
}

}  // namespace dtrain
