// comm/shm_segment.h — shared memory that the ranks of one host map, with no name anywhere.
//
// Contract
// - create_shm_segment(bytes, label) makes an anonymous shared-memory file (memfd) of that size
//   and returns it with a handle ("PID FD DEV INO") to publish through the store.
// - open_shm_segment(handle, ...) opens a peer's segment through /proc/PID/fd/FD and checks it
//   is the very file the handle names (device and inode), so a recycled pid or a handle from
//   another host is an error, never a wrong mapping. The peer must be alive and still hold the
//   descriptor: an owner keeps it (ShmSegment::fd) until every peer has mapped, then closes it.
// - Nothing is ever linked in /dev/shm: whatever happens (a rank fails during rendezvous, is
//   killed with SIGKILL during setup), the kernel frees the memory when the last process that
//   maps it or holds its descriptor is gone. Same-user ranks only (as /dev/shm's 0600 was).
// Errors are IoError / PeerFailure naming the rank and what to do.
#pragma once

#include <cstddef>
#include <string>

#include "comm/socket.h"

namespace dtrain {

struct ShmSegment {
  Fd fd;
  std::string handle;
};

ShmSegment create_shm_segment(size_t bytes, const std::string& label);
// `who` names the owner in errors ("rank 3"); `peer` is its rank for PeerFailure.
Fd open_shm_segment(const std::string& handle, size_t bytes, const std::string& who, int peer);

}  // namespace dtrain
