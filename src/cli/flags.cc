#include "cli/flags.h"

#include <cerrno>
#include <cmath>

#include <cstdlib>
#include <sstream>

#include "base/error.h"

namespace dtrain::cli {

Flags::Flags(std::string command, const std::vector<std::string>& args) : command_(std::move(command)) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      rest_.assign(args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    }
    if (a == "--help" || a == "-h") {
      help_ = true;
      continue;
    }
    if (a.size() > 1 && a[0] == '-' && !(a.size() > 1 && (std::isdigit(static_cast<unsigned char>(a[1])) || a[1] == '.'))) {
      std::string name = a.substr(a[1] == '-' ? 2 : 1), value;
      auto eq = name.find('=');
      bool has_value = eq != std::string::npos;
      if (has_value) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      } else if (i + 1 < args.size() && !(args[i + 1].size() > 1 && args[i + 1][0] == '-' &&
                                          !std::isdigit(static_cast<unsigned char>(args[i + 1][1])))) {
        value = args[++i];
        has_value = true;
      }
      DT_CHECK(!given_.count(name), InvalidArgument,
               "option --" << name << " given twice; see 'dtrain " << command_ << " --help'");
      given_[name] = has_value ? value : std::string("\x01");  // \x01 marks "no value"
    } else {
      positional_.push_back(a);
    }
  }
}

std::optional<std::string> Flags::take(const std::string& name, const std::string& short_name, bool is_bool,
                                       const std::string& help, const std::string& fallback) {
  help_lines_.push_back({(short_name.empty() ? "    " : "-" + short_name + ", ") + "--" + name +
                             (is_bool ? "" : " " + (fallback.empty() ? std::string("VALUE") : fallback)),
                         help});
  for (const std::string& n : {name, short_name}) {
    if (n.empty()) continue;
    auto it = given_.find(n);
    if (it == given_.end()) continue;
    used_[n] = true;
    if (is_bool) {
      DT_CHECK(it->second == "\x01" || it->second == "true" || it->second == "false" || it->second == "1" ||
                   it->second == "0",
               InvalidArgument, "option --" << name << " takes no value (got '" << it->second << "')");
      return it->second == "false" || it->second == "0" ? "0" : "1";
    }
    DT_CHECK(it->second != "\x01", InvalidArgument,
             "option --" << name << " needs a value; see 'dtrain " << command_ << " --help'");
    return it->second;
  }
  return std::nullopt;
}

std::string Flags::get_string(const std::string& name, const std::string& fallback, const std::string& help,
                              const std::string& short_name) {
  auto v = take(name, short_name, false, help, fallback);
  return v ? *v : fallback;
}

std::optional<std::string> Flags::get_optional(const std::string& name, const std::string& help,
                                               const std::string& short_name) {
  return take(name, short_name, false, help, "");
}

int64_t Flags::get_int(const std::string& name, int64_t fallback, int64_t lo, int64_t hi, const std::string& help,
                       const std::string& short_name) {
  auto v = take(name, short_name, false, help, std::to_string(fallback));
  if (!v) return fallback;
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v->c_str(), &end, 10);
  DT_CHECK(!v->empty() && *end == '\0' && errno != ERANGE, InvalidArgument,
           "option --" << name << " expects an integer between " << lo << " and " << hi << ", got '" << *v << "'");
  DT_CHECK(x >= lo && x <= hi, InvalidArgument,
           "option --" << name << " must be between " << lo << " and " << hi << ", got " << x);
  return x;
}

double Flags::get_double(const std::string& name, double fallback, double lo, double hi, const std::string& help,
                         const std::string& short_name) {
  std::ostringstream fb;
  fb << fallback;
  auto v = take(name, short_name, false, help, fb.str());
  if (!v) return fallback;
  char* end = nullptr;
  double x = std::strtod(v->c_str(), &end);
  DT_CHECK(!v->empty() && *end == '\0', InvalidArgument, "option --" << name << " expects a number, got '" << *v << "'");
  DT_CHECK(std::isfinite(x) && x >= lo && x <= hi, InvalidArgument,
           "option --" << name << " must be a number between " << lo << " and " << hi << ", got " << *v);
  return x;
}

bool Flags::get_bool(const std::string& name, const std::string& help) {
  auto v = take(name, "", true, help, "");
  return v && *v == "1";
}

bool Flags::has(const std::string& name) const { return given_.count(name) > 0; }

std::string Flags::help_text(const std::string& synopsis) const {
  std::ostringstream os;
  os << "usage: dtrain " << command_ << " " << synopsis << "\n\noptions:\n";
  for (const auto& [flag, help] : help_lines_) {
    os << "  " << flag;
    os << std::string(flag.size() < 30 ? 30 - flag.size() : 1, ' ') << help << "\n";
  }
  return os.str();
}

void Flags::finish() const {
  for (const auto& [name, value] : given_)
    DT_CHECK(used_.count(name), InvalidArgument,
             "unknown option " << (name.size() == 1 ? "-" : "--") << name << "; see 'dtrain " << command_ << " --help'");
}

}  // namespace dtrain::cli
