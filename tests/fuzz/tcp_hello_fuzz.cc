// libFuzzer target: the tcp transport's handshake (comm/tcp_hello.h). The acceptor reads what
// check_tcp_hello asks for, as make_tcp_fabric does, from hostile bytes. Checked: the length
// asked for never exceeds a header plus kMaxTcpToken (so a forged length cannot make a rank
// wait for or buffer more), and a connection is admitted only with the job's token, from a
// rank above the acceptor and not yet connected.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "comm/tcp_hello.h"

using namespace dtrain;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int world = 1 + data[0] % 8, me = data[1] % world;
  std::vector<bool> connected(world);
  for (int r = 0; r < world; ++r) connected[r] = (data[0] >> 3 >> (r % 5)) & 1;
  const std::string token = "0123456789abcdef0123456789abcdef";
  std::string stream(reinterpret_cast<const char*>(data + 2), size - 2);
  std::string got;
  HelloCheck c;
  while ((c = check_tcp_hello(got, me, world, token, connected)).verdict == HelloVerdict::kNeedMore) {
    if (c.need > kTcpHelloHeader + kMaxTcpToken || c.need <= got.size()) std::abort();
    if (stream.size() < c.need) return 0;  // the peer went quiet: the caller's deadline ends it
    got = stream.substr(0, c.need);
  }
  if (c.verdict == HelloVerdict::kAccepted) {
    if (c.rank <= me || c.rank >= world || connected[c.rank]) std::abort();
    if (got != encode_tcp_hello(static_cast<uint32_t>(c.rank), token)) std::abort();
  } else if (c.why.empty()) {
    std::abort();  // a refusal always says why
  }
  return 0;
}
