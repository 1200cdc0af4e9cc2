#include "base/env.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "base/error.h"

namespace dtrain {

std::optional<std::string> env_get(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return std::nullopt;
  return std::string(v);
}

std::string env_string(const char* name, const std::string& fallback) {
  auto v = env_get(name);
  return v ? *v : fallback;
}

int64_t env_int(const char* name, int64_t fallback) {
  auto v = env_get(name);
  if (!v || v->empty()) return fallback;
  char* end = nullptr;
  long long x = std::strtoll(v->c_str(), &end, 10);
  DT_CHECK(end && *end == '\0', InvalidArgument,
           "environment variable " << name << "='" << *v << "' is not an integer");
  return x;
}

int64_t parse_size(const std::string& text, const std::string& what) {
  char* end = nullptr;
  double x = std::strtod(text.c_str(), &end);
  DT_CHECK(end != text.c_str() && x >= 0, InvalidArgument,
           what << ": '" << text << "' is not a size (examples: 8, 64K, 4M, 1G)");
  std::string suffix(end);
  double mult = 1;
  if (suffix == "" || suffix == "B") mult = 1;
  else if (suffix == "K" || suffix == "k" || suffix == "KiB" || suffix == "KB") mult = 1024.0;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB" || suffix == "MB") mult = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g" || suffix == "GiB" || suffix == "GB") mult = 1024.0 * 1024 * 1024;
  else DT_THROW(InvalidArgument, what << ": unknown size suffix '" << suffix << "' in '" << text
                                      << "' (use K, M or G)");
  return static_cast<int64_t>(std::llround(x * mult));
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[64];
  if (bytes == std::floor(bytes)) std::snprintf(buf, sizeof buf, "%.0f %s", bytes, units[u]);
  else std::snprintf(buf, sizeof buf, "%.2f %s", bytes, units[u]);
  return buf;
}

}  // namespace dtrain
