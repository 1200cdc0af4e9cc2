#include "base/log.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace dtrain {
namespace {
LogLevel threshold() {
  static const LogLevel level = [] {
    const char* s = std::getenv("DTRAIN_LOG");
    if (!s) return LogLevel::kWarn;
    if (!std::strcmp(s, "debug")) return LogLevel::kDebug;
    if (!std::strcmp(s, "info")) return LogLevel::kInfo;
    if (!std::strcmp(s, "error")) return LogLevel::kError;
    return LogLevel::kWarn;
  }();
  return level;
}
}  // namespace

bool log_enabled(LogLevel level) { return level >= threshold(); }

void log_line(LogLevel level, const std::string& line) {
  static const char* names[] = {"debug", "info", "warn", "error"};
  std::string out = std::string("[dtrain ") + names[static_cast<int>(level)] + "] " + line + "\n";
  // One write() per line keeps lines whole across threads and processes.
  ssize_t ignored = ::write(2, out.data(), out.size());
  (void)ignored;
}
}  // namespace dtrain
