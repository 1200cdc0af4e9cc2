// base/error.h — typed errors and the check macros every layer uses.
//
// Contract
// - Every failure the user can cause or see is a C++ exception derived from dtrain::Error,
//   whose what() reads as a sentence a user can act on, followed by "[file:line]".
// - The type says what kind of failure it is, so callers catch what they can handle:
//     InvalidArgument  bad flag, bad shape, mismatched sizes, wrong usage
//     IoError          a file or socket operation failed (names the path or address)
//     Corrupt          data that fails validation (bad magic, checksum, truncated file)
//     Timeout          a blocking call ran past its deadline (names what was missing)
//     PeerFailure      a peer rank died, closed or reset its connection (peer() names it)
//     Desync           ranks called different collectives (names both calls)
// - DT_THROW(Type, stream-expr) builds the message with operator<<;
//   DT_CHECK(cond, Type, stream-expr) throws when cond is false;
//   DT_CHECK_EQ / _LE / _LT add both compared values to the message.
// Thread-safety: stateless.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace dtrain {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class InvalidArgument : public Error {
 public:
  using Error::Error;
};
class IoError : public Error {
 public:
  using Error::Error;
};
class Corrupt : public Error {
 public:
  using Error::Error;
};
class Timeout : public Error {
 public:
  using Error::Error;
};
class Desync : public Error {
 public:
  using Error::Error;
};
class PeerFailure : public Error {
 public:
  PeerFailure(const std::string& what, int peer) : Error(what), peer_(peer) {}
  int peer() const { return peer_; }

 private:
  int peer_;
};

namespace detail {
std::string with_location(const std::string& msg, const char* file, int line);

template <class E>
[[noreturn]] void raise(const char* file, int line, const std::string& msg) {
  throw E(with_location(msg, file, line));
}
}  // namespace detail

// strerror for errno values, thread-safe.
std::string errno_string(int err);

}  // namespace dtrain

#define DT_THROW(Type, msg)                                         \
  do {                                                              \
    std::ostringstream dt_os_;                                      \
    dt_os_ << msg;                                                  \
    ::dtrain::detail::raise<Type>(__FILE__, __LINE__, dt_os_.str()); \
  } while (0)

#define DT_CHECK(cond, Type, msg) \
  do {                            \
    if (!(cond)) DT_THROW(Type, msg); \
  } while (0)

#define DT_CHECK_OP_(a, b, op, Type, msg)                                          \
  do {                                                                             \
    const auto& dt_a_ = (a);                                                       \
    const auto& dt_b_ = (b);                                                       \
    if (!(dt_a_ op dt_b_))                                                         \
      DT_THROW(Type, msg << " (" #a " = " << dt_a_ << ", " #b " = " << dt_b_ << ")"); \
  } while (0)

#define DT_CHECK_EQ(a, b, Type, msg) DT_CHECK_OP_(a, b, ==, Type, msg)
#define DT_CHECK_LE(a, b, Type, msg) DT_CHECK_OP_(a, b, <=, Type, msg)
#define DT_CHECK_LT(a, b, Type, msg) DT_CHECK_OP_(a, b, <, Type, msg)

// Throws IoError with the errno text when a system call returned -1.
#define DT_SYSCHECK(expr, msg)                                            \
  do {                                                                    \
    if ((expr) == -1) {                                                   \
      int dt_err_ = errno;                                                \
      DT_THROW(::dtrain::IoError, msg << ": " << ::dtrain::errno_string(dt_err_)); \
    }                                                                     \
  } while (0)
