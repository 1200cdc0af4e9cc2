#include "base/log.h"

#include <unistd.h>

#include <string>

#include "base/settings.h"

namespace dtrain {
namespace {
LogLevel threshold() {
  static const LogLevel level = [] {
    // Lenient on purpose: a log threshold that cannot be parsed must not stop a program.
    const std::string s = Settings::process().text("DTRAIN_LOG");
    if (s == "debug") return LogLevel::kDebug;
    if (s == "info") return LogLevel::kInfo;
    if (s == "error") return LogLevel::kError;
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
