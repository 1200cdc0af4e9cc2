// base/log.h — leveled logging to stderr.
//
// Contract: DT_LOG(level) << ...; writes one whole line (never interleaved with another
// thread's line) when level >= the threshold read once from DTRAIN_LOG
// (debug|info|warn|error, default warn). The threshold is read on first use and cached in a
// function-local static: the only process-wide value in dtrain, and it is immutable.
#pragma once

#include <sstream>

namespace dtrain {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

bool log_enabled(LogLevel level);
void log_line(LogLevel level, const std::string& line);

class LogMessage {
 public:
  explicit LogMessage(LogLevel level) : level_(level) {}
  ~LogMessage() { log_line(level_, os_.str()); }
  std::ostream& stream() { return os_; }

 private:
  LogLevel level_;
  std::ostringstream os_;
};

}  // namespace dtrain

#define DT_LOG(level)                                                        \
  if (!::dtrain::log_enabled(::dtrain::LogLevel::k##level)) {                \
  } else                                                                     \
    ::dtrain::LogMessage(::dtrain::LogLevel::k##level).stream()
