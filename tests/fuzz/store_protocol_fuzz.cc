// libFuzzer target: the TCP store's protocol state machine (comm/store_service.h) fed hostile
// bytes. The input is a script: each step picks a client (0-3), how many bytes it sends next,
// and sometimes a tick (deadlines) or a close. Checked on every step: nothing throws out of
// the service, every answer is a well-formed frame, a client that has not logged in is never
// answered OK except for the HELLO with the right token, and no connection buffers more than
// one pre-login frame before it logs in.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "comm/store_service.h"
#include "comm/tcp_store_protocol.h"

using namespace dtrain;
namespace sp = store_protocol;

namespace {
void check_frames(const std::string& out, bool* saw_ok) {
  size_t pos = 0;
  while (pos < out.size()) {
    if (out.size() - pos < 4) std::abort();  // a torn answer
    uint32_t n;
    std::memcpy(&n, out.data() + pos, 4);
    if (n == 0 || out.size() - pos - 4 < n) std::abort();
    std::vector<std::string> fields;
    uint8_t op = sp::decode(out.substr(pos + 4, n), &fields);
    if (op != sp::kOk && op != sp::kErr && op != sp::kTimeout) std::abort();
    if (op == sp::kOk) *saw_ok = true;
    pos += 4 + n;
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  StoreLimits limits;
  limits.max_prelogin_frame = 64;  // small limits so the fuzzer reaches them
  limits.max_frame = 4096;
  limits.max_clients = 3;
  limits.max_prelogin_clients = 2;
  limits.max_outbox = 1 << 16;
  limits.login_timeout_s = 0;  // every tick expires logins not yet done
  StoreService service("tok", limits);
  bool open[4] = {false, false, false, false};
  bool logged_in[4] = {false, false, false, false};
  std::string sent[4];  // bytes each client sent so far (to tell a correct HELLO)
  size_t pos = 0;
  while (pos + 2 <= size) {
    uint8_t ctl = data[pos], len = data[pos + 1];
    pos += 2;
    int id = ctl & 3;
    if (ctl & 0x80) {  // deadlines pass
      for (int late : service.tick()) {
        if (!service.has(late)) std::abort();
        service.close(late);
        open[late] = false;
      }
      continue;
    }
    if (ctl & 0x40) {  // the client hangs up
      if (open[id]) service.close(id);
      open[id] = false;
      continue;
    }
    if (!open[id]) {
      std::string refusal;
      std::vector<int> evicted;
      bool ok = service.admit(id, "fuzz", &refusal, &evicted);
      for (int e : evicted) open[e] = false;
      if (!ok) continue;
      open[id] = true;
      logged_in[id] = false;
      sent[id].clear();
    }
    size_t n = std::min<size_t>(len, size - pos);
    sent[id].append(reinterpret_cast<const char*>(data + pos), n);
    bool keep = service.feed(id, reinterpret_cast<const char*>(data + pos), n);
    pos += n;
    bool saw_ok = false;
    check_frames(service.outbox(id), &saw_ok);
    if (!logged_in[id] && saw_ok) {
      // The only way in: a whole HELLO("tok") frame first.
      std::string hello = sp::encode(sp::kHello, {"tok"});
      if (sent[id].compare(0, hello.size(), hello) != 0) std::abort();
      logged_in[id] = true;
    }
    service.outbox(id).clear();
    if (!keep) {
      service.close(id);
      open[id] = false;
    }
  }
  for (int id = 0; id < 4; ++id)
    if (open[id] != service.has(id)) std::abort();
  return 0;
}
