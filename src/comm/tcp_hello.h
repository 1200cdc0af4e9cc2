// comm/tcp_hello.h — the introduction a rank sends first on a tcp transport connection.
//
// hello = u64 magic "dtrntcp2" | u32 rank | u32 token length | token   (little-endian)
// (Version 2: a large payload may follow its header after padding, comm/transport.cc
// kPadShift; a rank of version 1 is refused for its magic instead of misreading the stream.)
// The accepting rank admits a connection only from a rank of the job above its own, not yet
// connected, presenting the job's token; anything else is refused with a reason (and logged
// by the caller), never trusted. The token may be at most kMaxTcpToken bytes, so a hostile
// length cannot make the acceptor wait for or buffer more than that.
// check_tcp_hello is pure (no I/O), so it is unit-tested and fuzzed
// (tests/fuzz/tcp_hello_fuzz.cc); the fabric reads the header, then the token, and calls it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain {

constexpr uint64_t kTcpHelloMagic = 0x6474726e74637032ull;  // "dtrntcp2"
constexpr size_t kTcpHelloHeader = 16;
constexpr uint32_t kMaxTcpToken = 4096;

std::string encode_tcp_hello(uint32_t rank, const std::string& token);

enum class HelloVerdict { kNeedMore, kAccepted, kRefused };

struct HelloCheck {
  HelloVerdict verdict = HelloVerdict::kNeedMore;
  size_t need = kTcpHelloHeader;  // kNeedMore: total bytes the hello has
  int rank = -1;                  // kAccepted: the peer
  std::string why;                // kRefused: for the log
};

// `bytes`: what the connection sent so far. `connected[r]`: rank r already has a channel.
HelloCheck check_tcp_hello(const std::string& bytes, int my_rank, int size, const std::string& token,
                           const std::vector<bool>& connected);

}  // namespace dtrain
