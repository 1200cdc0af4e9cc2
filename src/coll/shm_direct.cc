// All-reduce, shared-memory direct (ranks on one host).
//
// Every rank maps a shared-memory segment of its own and the segments of all its peers.
// The buffer is processed in chunks of at most kChunkBytes: each rank copies its chunk into
// its segment; after a barrier, rank r reduces slice r of the chunk straight out of the p
// segments, in rank order, writing the total back into slice r of its own segment (nobody
// else reads that slice in this phase); after a second barrier every rank copies slice q
// from rank q's segment; a third barrier lets the segments be reused. No message carries
// payload: each byte is copied in once, read p times by one reducer and copied out once, so
// the transport's two copies per hop disappear. Results are rank-ordered, hence
// bit-identical everywhere (and equal to the deterministic mode's).
//
// Segments are created per call (shm_open under a random name, published in the store,
// mapped by every peer, then unlinked after a barrier) — the communicator has no place to
// cache them yet — so the first touch of each page costs a fault; MAP_POPULATE prefaults.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "coll/algorithms.h"
#include "coll/reduce_kernels.h"

namespace dtrain::algo {
namespace {

constexpr size_t kChunkBytes = 16u << 20;

struct Mapping {
  void* addr = MAP_FAILED;
  size_t bytes = 0;
  ~Mapping() {
    if (addr != MAP_FAILED) ::munmap(addr, bytes);
  }
  char* data() const { return static_cast<char*>(addr); }
};

void map_segment(Mapping& m, int fd, size_t bytes, const std::string& name) {
  m.bytes = bytes;
  m.addr = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  int err = errno;
  ::close(fd);
  DT_CHECK(m.addr != MAP_FAILED, IoError, "shm_direct: mmap of " << name << " failed: " << errno_string(err));
}

}  // namespace

void allreduce_shm_direct(Call& c, char* buf, size_t n) {
  const int p = c.size(), me = c.rank();
  if (p == 1 || n == 0) return;
  const size_t es = c.elem();
  const size_t chunk = std::max<size_t>(1, std::min(n, kChunkBytes / es));
  const size_t seg_bytes = chunk * es;
  uint32_t barrier_step = 0;
  auto barrier = [&] {
    // Dissemination barrier on this call's tags.
    char token = 1, got = 0;
    Transport& t = c.comm().transport();
    for (int d = 1; d < p; d <<= 1) {
      uint32_t step = 16 + barrier_step++;
      std::vector<Request> rs{t.irecv((me - d + p) % p, c.tag(step), &got, 1), t.isend((me + d) % p, c.tag(step), &token, 1)};
      c.wait_all(rs);
    }
  };

  std::random_device rd;
  std::string own = "/dtrain-shmd-" + std::to_string(::getpid()) + "-" + std::to_string(rd()) + std::to_string(rd());
  std::vector<Mapping> segs(p);
  {
    int fd = ::shm_open(own.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    DT_CHECK(fd >= 0, IoError, "shm_direct: shm_open " << own << ": " << errno_string(errno));
    if (::ftruncate(fd, static_cast<off_t>(seg_bytes)) != 0) {
      int err = errno;
      ::close(fd);
      ::shm_unlink(own.c_str());
      DT_THROW(IoError, "shm_direct: ftruncate " << own << ": " << errno_string(err));
    }
    map_segment(segs[me], fd, seg_bytes, own);
  }
  Store& store = c.comm().store();
  std::string key = "shmd/" + std::to_string(c.seq()) + "/";
  bool unlinked = false;
  try {
    store.set(key + std::to_string(me), own);
    for (int q = 0; q < p; ++q) {
      if (q == me) continue;
      std::string name = store.get(key + std::to_string(q), c.remaining() < 0 ? Store::kDefaultTimeout : c.remaining());
      int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
      DT_CHECK(fd >= 0, IoError,
               "shm_direct: cannot open rank " << q << "'s segment " << name << " (ranks on different hosts?): "
                                               << errno_string(errno));
      map_segment(segs[q], fd, seg_bytes, name);
    }
    barrier();  // everyone has mapped everything: the names can go
    ::shm_unlink(own.c_str());
    unlinked = true;
  } catch (...) {
    if (!unlinked) ::shm_unlink(own.c_str());
    throw;
  }

  std::vector<const void*> in_rank_order(p);
  for (size_t lo = 0; lo < n; lo += chunk) {
    const size_t len = std::min(chunk, n - lo);
    Blocks slices(len, p);
    std::memcpy(segs[me].data(), buf + lo * es, len * es);
    barrier();
    const size_t mine = slices.off[me] * es;
    for (int q = 0; q < p; ++q) in_rank_order[q] = segs[q].data() + mine;
    if (slices.len(me)) reduce_ordered(c.dtype(), c.redop(), segs[me].data() + mine, in_rank_order.data(), p, slices.len(me));
    barrier();
    for (int q = 0; q < p; ++q)
      std::memcpy(buf + (lo + slices.off[q]) * es, segs[q].data() + slices.off[q] * es, slices.len(q) * es);
    barrier();
  }
}

}  // namespace dtrain::algo
