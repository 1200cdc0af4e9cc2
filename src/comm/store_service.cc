#include "comm/store_service.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "base/log.h"
#include "comm/store.h"
#include "comm/tcp_store_protocol.h"

namespace dtrain {
namespace sp = store_protocol;

namespace {
bool constant_time_equal(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// A wait's timeout in seconds: a finite number >= 0 (huge values mean "as long as it takes").
bool parse_timeout(const std::string& text, double* out) {
  if (text.empty() || text.size() > 64) return false;
  std::string z(text);  // NUL-terminated for strtod
  char* end = nullptr;
  double v = std::strtod(z.c_str(), &end);
  if (end != z.c_str() + z.size() || std::isnan(v) || v < 0) return false;
  *out = std::min(v, 1e9);
  return true;
}

std::string shown(const std::string& s) { return s.size() > 40 ? s.substr(0, 40) + "..." : s; }
}  // namespace

void StoreService::reply(Client& c, uint8_t op, const std::vector<std::string>& fields) {
  c.outbox += sp::encode(op, fields);
}

bool StoreService::admit(int id, const std::string& name, std::string* refusal, std::vector<int>* evicted) {
  if (static_cast<int>(clients_.size()) >= limits_.max_clients) {
    ++refused_;
    *refusal = sp::encode(sp::kErr, {"store server busy: " + std::to_string(clients_.size()) +
                                         " connections already (the limit); retry later",
                                     sp::kRetryLater});
    return false;
  }
  int prelogin = 0;
  auto oldest = clients_.end();
  for (auto it = clients_.begin(); it != clients_.end(); ++it) {
    if (it->second.authenticated) continue;
    ++prelogin;
    if (oldest == clients_.end() || it->second.order < oldest->second.order) oldest = it;
  }
  if (prelogin >= limits_.max_prelogin_clients && oldest != clients_.end()) {
    ++refused_;
    evicted->push_back(oldest->first);
    close(oldest->first);
  }
  Client c;
  c.name = name;
  c.login = Deadline::after(limits_.login_timeout_s);
  c.order = admitted_++;
  clients_[id] = std::move(c);
  return true;
}

void StoreService::close(int id) {
  clients_.erase(id);
  waits_.remove_if([id](const PendingWait& w) { return w.client == id; });
}

bool StoreService::feed(int id, const char* data, size_t n) {
  auto it = clients_.find(id);
  if (it == clients_.end()) return false;
  Client& c = it->second;
  c.inbox.append(data, n);
  try {
    while (c.inbox.size() >= 4) {
      uint32_t len;
      std::memcpy(&len, c.inbox.data(), 4);
      uint32_t limit = c.authenticated ? limits_.max_frame : limits_.max_prelogin_frame;
      if (len == 0 || len > limit) {
        ++refused_;
        reply(c, sp::kErr, {"store protocol: frame of " + std::to_string(len) + " bytes (limit " +
                            std::to_string(limit) + (c.authenticated ? ")" : " before login; is this a dtrain store client?)")});
        DT_LOG(Warn) << "store server: dropping " << c.name << ": frame of " << len << " bytes (limit " << limit << ")";
        return false;
      }
      if (c.inbox.size() < 4 + size_t{len}) break;
      std::string body = c.inbox.substr(4, len);
      c.inbox.erase(0, 4 + size_t{len});
      if (!handle(id, c, body)) return false;
      answer_waits();  // one answer per request, in order
      if (c.outbox.size() > limits_.max_outbox) {
        DT_LOG(Warn) << "store server: dropping " << c.name << ": it does not read its answers";
        return false;
      }
    }
  } catch (const std::exception& e) {
    reply(c, sp::kErr, {e.what()});
    DT_LOG(Warn) << "store server: dropping client " << c.name << ": " << e.what();
    return false;
  }
  return true;
}

bool StoreService::handle(int id, Client& c, const std::string& body) {
  std::vector<std::string> f;
  uint8_t op = sp::decode(body, &f);
  if (!c.authenticated) {
    if (op != sp::kHello || f.size() != 1 || !constant_time_equal(f[0], token_)) {
      ++refused_;
      DT_LOG(Warn) << "store server: refused connection from " << c.name
                   << ": wrong job token (the client must present this job's DTRAIN_TOKEN)";
      reply(c, sp::kErr, {"wrong job token: this store belongs to another job (check DTRAIN_TOKEN)"});
      return false;
    }
    c.authenticated = true;
    reply(c, sp::kOk, {});
    return true;
  }
  try {
    handle_request(id, c, op, f);
  } catch (const InvalidArgument& e) {
    reply(c, sp::kErr, {e.what()});  // a wrong request, answered; the connection stays
  }
  return true;
}

void StoreService::handle_request(int id, Client& c, uint8_t op, const std::vector<std::string>& f) {
  auto need = [&](size_t n) {
    DT_CHECK(f.size() >= n, Corrupt, "store protocol: op " << int(op) << " needs " << n << " fields");
  };
  switch (op) {
    case sp::kSet:
      need(2);
      data_[f[0]] = f[1];
      reply(c, sp::kOk, {});
      break;
    case sp::kAdd: {
      need(2);
      int64_t delta;
      DT_CHECK(parse_store_int(f[1], &delta), InvalidArgument,
               "store: ADD " << f[0] << ": the amount '" << shown(f[1]) << "' is not a decimal 64-bit integer");
      auto it = data_.find(f[0]);
      int64_t v = checked_add(f[0], it == data_.end() ? nullptr : &it->second, delta);
      data_[f[0]] = std::to_string(v);
      reply(c, sp::kOk, {std::to_string(v)});
      break;
    }
    case sp::kGet:
    case sp::kWait: {
      need(op == sp::kGet ? 2 : 1);
      const std::string& t = f[op == sp::kGet ? 1 : 0];
      double timeout_s;
      DT_CHECK(parse_timeout(t, &timeout_s), InvalidArgument,
               "store: " << (op == sp::kGet ? "GET" : "WAIT") << " timeout '" << shown(t)
                         << "' is not a number of seconds >= 0");
      std::vector<std::string> keys = op == sp::kGet ? std::vector<std::string>{f[0]}
                                                     : std::vector<std::string>(f.begin() + 1, f.end());
      waits_.push_back({id, keys, Deadline::after(timeout_s), op == sp::kGet});
      break;
    }
    case sp::kCheck: {
      bool all = std::all_of(f.begin(), f.end(), [&](const std::string& k) { return data_.count(k) > 0; });
      reply(c, sp::kOk, {all ? "1" : "0"});
      break;
    }
    case sp::kDelete:
      need(1);
      reply(c, sp::kOk, {data_.erase(f[0]) ? "1" : "0"});
      break;
    default:
      DT_THROW(Corrupt, "store protocol: unknown op " << int(op));
  }
}

void StoreService::answer_waits() {
  for (auto it = waits_.begin(); it != waits_.end();) {
    std::vector<std::string> missing;
    for (const auto& k : it->keys)
      if (!data_.count(k)) missing.push_back(k);
    if (!missing.empty() && !it->deadline.expired()) {
      ++it;
      continue;
    }
    auto c = clients_.find(it->client);
    if (c != clients_.end()) {
      if (missing.empty()) reply(c->second, sp::kOk, it->is_get ? std::vector<std::string>{data_[it->keys[0]]}
                                                                 : std::vector<std::string>{});
      else reply(c->second, sp::kTimeout, missing);
    }
    it = waits_.erase(it);
  }
}

std::vector<int> StoreService::tick() {
  answer_waits();
  std::vector<int> late;
  for (auto& [id, c] : clients_) {
    if (c.authenticated || !c.login.expired()) continue;
    ++refused_;
    reply(c, sp::kErr, {"store server: no valid HELLO within " + std::to_string(limits_.login_timeout_s) + " s"});
    late.push_back(id);
  }
  return late;
}

int StoreService::next_timeout_ms() const {
  int ms = 1000;
  for (const auto& w : waits_) ms = std::min(ms, w.deadline.remaining_ms());
  for (const auto& [id, c] : clients_)
    if (!c.authenticated) ms = std::min(ms, c.login.remaining_ms());
  return ms;
}

}  // namespace dtrain
