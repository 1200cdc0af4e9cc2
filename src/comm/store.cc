#include "comm/store.h"

#include <charconv>
#include <sstream>

#include "base/clock.h"
#include "base/error.h"
#include "comm/file_store.h"
#include "comm/tcp_store.h"

namespace dtrain {

std::string missing_keys_message(const std::vector<std::string>& missing, double timeout_s) {
  std::ostringstream os;
  os << "store: timed out after " << timeout_s << " s waiting for key" << (missing.size() == 1 ? "" : "s") << " [";
  for (size_t i = 0; i < missing.size(); ++i) os << (i ? ", " : "") << missing[i];
  os << "]";
  return os.str();
}

bool parse_store_int(const std::string& text, int64_t* out) {
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && p == end && !text.empty();
}

int64_t checked_add(const std::string& key, const std::string* current, int64_t delta) {
  int64_t now = 0;
  if (current && !parse_store_int(*current, &now)) {
    std::string shown = current->size() > 40 ? current->substr(0, 40) + "..." : *current;
    DT_THROW(InvalidArgument, "store: add(\"" << key << "\", " << delta << "): the key holds '" << shown
                                                << "', not a decimal integer (it was written with set(); use another key)");
  }
  int64_t sum;
  DT_CHECK(!__builtin_add_overflow(now, delta, &sum), InvalidArgument,
           "store: add(\"" << key << "\", " << delta << ") overflows: the key holds " << now
                            << " and the sum does not fit a 64-bit integer");
  return sum;
}

void MemoryStore::set(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    data_[key] = value;
  }
  cv_.notify_all();
}

std::string MemoryStore::get(const std::string& key, double timeout_s) {
  wait({key}, timeout_s);
  std::lock_guard<std::mutex> lock(mu_);
  return data_.at(key);
}

int64_t MemoryStore::add(const std::string& key, int64_t delta) {
  int64_t v;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = data_.find(key);
    v = checked_add(key, it == data_.end() ? nullptr : &it->second, delta);
    data_[key] = std::to_string(v);
  }
  cv_.notify_all();
  return v;
}

void MemoryStore::wait(const std::vector<std::string>& keys, double timeout_s) {
  double t = resolve(timeout_s);
  Deadline deadline = Deadline::after(t);
  std::unique_lock<std::mutex> lock(mu_);
  auto all_there = [&] {
    for (const auto& k : keys)
      if (!data_.count(k)) return false;
    return true;
  };
  if (!cv_.wait_until(lock, deadline.time_point(), all_there)) {
    std::vector<std::string> missing;
    for (const auto& k : keys)
      if (!data_.count(k)) missing.push_back(k);
    DT_THROW(Timeout, missing_keys_message(missing, t));
  }
}

bool MemoryStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& k : keys)
    if (!data_.count(k)) return false;
  return true;
}

bool MemoryStore::remove(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return data_.erase(key) > 0;
}

std::vector<std::string> PrefixStore::prefixed(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(prefix_ + k);
  return out;
}

void PrefixStore::wait(const std::vector<std::string>& keys, double t) {
  // Keys in a Timeout message keep the prefix: that is what a user can look up in the store.
  base_->wait(prefixed(keys), resolve(t));
}

bool PrefixStore::check(const std::vector<std::string>& keys) { return base_->check(prefixed(keys)); }

std::shared_ptr<Store> open_store(const std::string& url, const std::string& token, double timeout_s) {
  if (url.rfind("tcp://", 0) == 0) {
    std::string hp = url.substr(6);
    auto colon = hp.rfind(':');
    DT_CHECK(colon != std::string::npos, InvalidArgument,
             "store address '" << url << "' has no port (expected tcp://HOST:PORT)");
    int port = 0;
    try {
      port = std::stoi(hp.substr(colon + 1));
    } catch (...) {
      DT_THROW(InvalidArgument, "store address '" << url << "' has a bad port (expected tcp://HOST:PORT)");
    }
    return std::make_shared<TcpStore>(hp.substr(0, colon), port, token, timeout_s);
  }
  if (url.rfind("file://", 0) == 0) return std::make_shared<FileStore>(url.substr(7), timeout_s);
  DT_THROW(InvalidArgument, "unknown store address '" << url << "' (expected tcp://HOST:PORT or file:///DIR)");
}

}  // namespace dtrain
