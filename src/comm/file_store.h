// comm/file_store.h — the rendezvous store as a directory on a shared file system.
//
// Contract: one file per key (name hex-encoded), written to a temp file and renamed so a
// reader never sees half a value; add() holds an flock on DIR/.lock. Waits poll the directory
// with a short back-off (a file system offers no cheaper notification) and time out naming the
// missing keys. The directory is created with mode 0700: the file system's permissions are
// this store's admission control (use it for mpirun/srun jobs on one host or a shared FS).
// An existing directory is used only if it is a real directory (not a symlink) owned by this
// user and not writable by others; anything else is an InvalidArgument naming the path.
// Thread- and process-safe.
//
// open_job_file_store: the store of an mpirun/srun job on one host without an address
// (world.cc). ROOT (e.g. /tmp/dtrain-UID-JOB-STEP, private 0700, owner-checked) holds one
// generation per run: rank 0 creates ROOT/gNONCE and publishes "NONCE PID START" in ROOT/gen;
// the other ranks wait (bounded by timeout_s) for a gen whose rank 0 is alive, so a rerun with
// the same job and step ids never reads a dead run's keys; rank 0 removes a dead run's
// generation, and refuses to start while another live job uses the same ids. Each rank leaves
// when its store is destroyed; the last to leave removes the generation and ROOT.
#pragma once

#include <memory>
#include <string>

#include "comm/store.h"

namespace dtrain {

class FileStore : public Store {
 public:
  FileStore(std::string dir, double timeout_s = 30);
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, double timeout_s = kDefaultTimeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, double timeout_s = kDefaultTimeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool remove(const std::string& key) override;

 private:
  std::string path(const std::string& key) const;
  bool read(const std::string& key, std::string* value) const;
  std::string dir_;
};

std::shared_ptr<Store> open_job_file_store(const std::string& root, int rank, int size, double timeout_s);

// Creates `dir` (mode 0700) or checks an existing one: a directory, not a symlink, owned by
// this user, no write access for group or others. Throws InvalidArgument naming `what`.
void ensure_private_dir(const std::string& dir, const std::string& what);

}  // namespace dtrain
