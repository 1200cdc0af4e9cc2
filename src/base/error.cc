#include "base/error.h"

#include <cstring>

namespace dtrain {
namespace detail {
std::string with_location(const std::string& msg, const char* file, int line) {
  const char* base = std::strstr(file, "src/");
  return msg + " [" + (base ? base + 4 : file) + ":" + std::to_string(line) + "]";
}
}  // namespace detail

std::string errno_string(int err) {
  char buf[256];
  // GNU strerror_r returns the message pointer (maybe not buf).
  const char* s = strerror_r(err, buf, sizeof buf);
  return s;
}
}  // namespace dtrain
