#include "comm/tcp_hello.h"

#include <cstring>

namespace dtrain {

std::string encode_tcp_hello(uint32_t rank, const std::string& token) {
  std::string hello(kTcpHelloHeader, '\0');
  uint32_t tlen = static_cast<uint32_t>(token.size());
  std::memcpy(hello.data(), &kTcpHelloMagic, 8);
  std::memcpy(hello.data() + 8, &rank, 4);
  std::memcpy(hello.data() + 12, &tlen, 4);
  return hello + token;
}

HelloCheck check_tcp_hello(const std::string& bytes, int my_rank, int size, const std::string& token,
                           const std::vector<bool>& connected) {
  HelloCheck c;
  if (bytes.size() < kTcpHelloHeader) return c;
  uint64_t magic;
  uint32_t rank, tlen;
  std::memcpy(&magic, bytes.data(), 8);
  std::memcpy(&rank, bytes.data() + 8, 4);
  std::memcpy(&tlen, bytes.data() + 12, 4);
  c.verdict = HelloVerdict::kRefused;
  if (magic != kTcpHelloMagic) {
    c.why = "not a dtrain tcp transport connection (wrong magic)";
    return c;
  }
  if (tlen > kMaxTcpToken) {
    c.why = "token of " + std::to_string(tlen) + " bytes (limit " + std::to_string(kMaxTcpToken) + ")";
    return c;
  }
  c.need = kTcpHelloHeader + tlen;
  if (bytes.size() < c.need) {
    c.verdict = HelloVerdict::kNeedMore;
    return c;
  }
  if (bytes.size() > c.need) {
    c.why = "more bytes than a hello";
    return c;
  }
  if (bytes.compare(kTcpHelloHeader, tlen, token) != 0 || tlen != token.size()) {
    c.why = "wrong job token";
    return c;
  }
  if (rank <= static_cast<uint32_t>(my_rank) || rank >= static_cast<uint32_t>(size)) {
    c.why = "rank " + std::to_string(rank) + " may not connect to rank " + std::to_string(my_rank) +
            " (only ranks above it, below " + std::to_string(size) + ")";
    return c;
  }
  if (rank < connected.size() && connected[rank]) {
    c.why = "rank " + std::to_string(rank) + " is already connected";
    return c;
  }
  c.verdict = HelloVerdict::kAccepted;
  c.rank = static_cast<int>(rank);
  return c;
}

}  // namespace dtrain
