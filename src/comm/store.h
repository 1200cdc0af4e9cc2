// comm/store.h — the rendezvous store: a small key/value service ranks meet through.
//
// Contract
// - set(key, value) stores bytes; get(key) waits until the key exists and returns it;
//   add(key, delta) atomically adds to a decimal integer value (missing = 0) and returns the
//   new value; wait(keys) returns when all keys exist; check(keys) says whether all exist now;
//   remove(key) deletes and says whether it existed.
// - Every wait has a timeout (the store's default, or one given per call). A wait that runs out
//   throws Timeout whose message names the keys still missing, e.g.
//   "store: timed out after 30 s waiting for keys [rank/3, rank/5]".
// - Implementations: MemoryStore (threads as ranks, tests), FileStore (a shared directory),
//   TcpStore (a client of TcpStoreServer, which admits only clients presenting the job token).
//   PrefixStore namespaces another store so sub-communicators do not collide.
// - Thread-safety: every implementation may be used from several threads at once.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/clock.h"

namespace dtrain {

class Store {
 public:
  explicit Store(double timeout_s) : timeout_s_(timeout_s) {}
  virtual ~Store() = default;

  virtual void set(const std::string& key, const std::string& value) = 0;
  virtual std::string get(const std::string& key, double timeout_s = kDefaultTimeout) = 0;
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  virtual void wait(const std::vector<std::string>& keys, double timeout_s = kDefaultTimeout) = 0;
  virtual bool check(const std::vector<std::string>& keys) = 0;
  virtual bool remove(const std::string& key) = 0;

  double timeout() const { return timeout_s_; }
  void set_timeout(double s) { timeout_s_ = s; }

 protected:
  double resolve(double t) const { return resolve_timeout(t, timeout_s_); }

 private:
  double timeout_s_;
};

// Formats the Timeout message every store uses.
std::string missing_keys_message(const std::vector<std::string>& missing, double timeout_s);

// Parses a whole decimal int64 ("12", "-3"); false for anything else (spaces, "1e3", overflow).
bool parse_store_int(const std::string& text, int64_t* out);
// What add(key, delta) stores when the key holds `current` (nullptr: missing = 0). Throws
// InvalidArgument naming the key when the stored value is not a decimal integer or the sum
// overflows int64 (every store gives the same answer, never a bare "stoll" or a wrap).
int64_t checked_add(const std::string& key, const std::string* current, int64_t delta);

class MemoryStore : public Store {
 public:
  explicit MemoryStore(double timeout_s = 30) : Store(timeout_s) {}
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, double timeout_s = kDefaultTimeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, double timeout_s = kDefaultTimeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool remove(const std::string& key) override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> data_;
};

class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base)
      : Store(base->timeout()), prefix_(std::move(prefix) + "/"), base_(std::move(base)) {}
  void set(const std::string& key, const std::string& value) override { base_->set(prefix_ + key, value); }
  std::string get(const std::string& key, double t = kDefaultTimeout) override {
    return base_->get(prefix_ + key, resolve(t));
  }
  int64_t add(const std::string& key, int64_t d) override { return base_->add(prefix_ + key, d); }
  void wait(const std::vector<std::string>& keys, double t = kDefaultTimeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool remove(const std::string& key) override { return base_->remove(prefix_ + key); }
  const std::shared_ptr<Store>& base() const { return base_; }

 private:
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const;
  std::string prefix_;
  std::shared_ptr<Store> base_;
};

// Opens a store from a URL: "tcp://HOST:PORT" (with token), "file:///abs/dir". Throws
// InvalidArgument for anything else.
std::shared_ptr<Store> open_store(const std::string& url, const std::string& token, double timeout_s);

}  // namespace dtrain
