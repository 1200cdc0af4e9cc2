// comm/file_store.h — the rendezvous store as a directory on a shared file system.
//
// Contract: one file per key (name hex-encoded), written to a temp file and renamed so a
// reader never sees half a value; add() holds an flock on DIR/.lock. Waits poll the directory
// with a short back-off (a file system offers no cheaper notification) and time out naming the
// missing keys. The directory is created with mode 0700: the file system's permissions are
// this store's admission control (use it for mpirun/srun jobs on one host or a shared FS).
// Thread- and process-safe.
#pragma once

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

}  // namespace dtrain
