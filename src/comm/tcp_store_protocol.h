// comm/tcp_store_protocol.h — framing shared by the TCP store's server and client.
// frame = u32 length | u8 opcode | fields (u32 length + bytes each). See tcp_store.h.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"

namespace dtrain::store_protocol {

enum Op : uint8_t { kHello = 1, kSet, kGet, kAdd, kWait, kCheck, kDelete, kOk = 100, kErr, kTimeout };

constexpr uint32_t kMaxFrame = 64u << 20;  // a store is for rendezvous, not bulk data

// The second field of an ERR that refuses a connection for a passing reason (the server is
// full, or out of descriptors): the client may connect again until its timeout. A refusal
// without it (a wrong token, a late login) is final.
inline const std::string kRetryLater = "retry";

inline void put_u32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }

inline std::string encode(uint8_t op, const std::vector<std::string>& fields) {
  std::string body(1, static_cast<char>(op));
  for (const auto& f : fields) {
    put_u32(body, static_cast<uint32_t>(f.size()));
    body += f;
  }
  std::string frame;
  put_u32(frame, static_cast<uint32_t>(body.size()));
  return frame + body;
}

// Decodes a frame body (without the length prefix). Throws Corrupt on malformed input.
inline uint8_t decode(const std::string& body, std::vector<std::string>* fields) {
  DT_CHECK(!body.empty(), Corrupt, "store protocol: empty frame");
  size_t pos = 1;
  fields->clear();
  while (pos < body.size()) {
    DT_CHECK(pos + 4 <= body.size(), Corrupt, "store protocol: truncated field length");
    uint32_t n;
    std::memcpy(&n, body.data() + pos, 4);
    pos += 4;
    DT_CHECK(pos + n <= body.size(), Corrupt, "store protocol: field overruns frame");
    fields->emplace_back(body.substr(pos, n));
    pos += n;
  }
  return static_cast<uint8_t>(body[0]);
}

}  // namespace dtrain::store_protocol
