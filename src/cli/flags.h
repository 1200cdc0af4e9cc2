// cli/flags.h — a small, strict command-line flag parser for the dtrain subcommands.
//
// Contract: Flags is built from the arguments after the subcommand. Options are declared by
// reading them (get_int, get_string, get_bool, ...); every read records the option for --help
// and for finish(), which throws InvalidArgument naming any option that was given but never
// read ("unknown option --bogus; see 'dtrain bench --help'"), so typos never pass silently.
// Accepted forms: --name value, --name=value, -n value (short aliases declared per read),
// flags without a value for get_bool. Everything after "--" is positional (rest()).
// A value of the wrong type or outside the option's range is an InvalidArgument naming the
// option, the expected form or range, and the value.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dtrain::cli {

class Flags {
 public:
  Flags(std::string command, const std::vector<std::string>& args);

  std::string get_string(const std::string& name, const std::string& fallback, const std::string& help,
                         const std::string& short_name = "");
  // Numbers must lie in [lo, hi] (doubles also be finite); otherwise InvalidArgument naming the
  // option, the range and the value given.
  int64_t get_int(const std::string& name, int64_t fallback, int64_t lo, int64_t hi, const std::string& help,
                  const std::string& short_name = "");
  double get_double(const std::string& name, double fallback, double lo, double hi, const std::string& help,
                    const std::string& short_name = "");
  bool get_bool(const std::string& name, const std::string& help);
  std::optional<std::string> get_optional(const std::string& name, const std::string& help,
                                          const std::string& short_name = "");
  bool has(const std::string& name) const;

  // Positional arguments (before any option, or after "--").
  const std::vector<std::string>& positional() const { return positional_; }
  const std::vector<std::string>& rest() const { return rest_; }

  bool help_requested() const { return help_; }
  std::string help_text(const std::string& synopsis) const;
  // Throws InvalidArgument for options given but never read.
  void finish() const;

 private:
  std::optional<std::string> take(const std::string& name, const std::string& short_name, bool is_bool,
                                  const std::string& help, const std::string& fallback);
  std::string command_;
  std::map<std::string, std::string> given_;     // name -> value ("" for bare flags)
  std::map<std::string, bool> used_;
  std::vector<std::pair<std::string, std::string>> help_lines_;
  std::vector<std::string> positional_, rest_;
  bool help_ = false;
};

}  // namespace dtrain::cli
