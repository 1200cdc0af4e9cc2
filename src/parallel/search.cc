#include "parallel/search.h"

#include <charconv>
#include <cmath>
#include <sstream>

#include "base/error.h"
#include "data/rng.h"

namespace dtrain {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur.push_back(c);
    }
  }
  out.push_back(cur);
  return out;
}

double number(const std::string& spec, const std::string& key, const std::string& v) {
  double x = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  DT_CHECK(!v.empty() && ec == std::errc() && end == v.data() + v.size(), InvalidArgument,
           "--search '" << spec << "': '" << v << "' is not a number (key " << key << ")");
  return x;
}

}  // namespace

std::string Trial::describe() const {
  std::ostringstream os;
  if (lr >= 0) os << "lr=" << lr << " ";
  if (batch >= 0) os << "batch=" << batch << " ";
  if (momentum >= 0) os << "momentum=" << momentum << " ";
  if (width >= 0) os << "width=" << width << " ";
  std::string s = os.str();
  return s.empty() ? "defaults" : s.substr(0, s.size() - 1);
}

std::vector<Trial> parse_search_grid(const std::string& spec) {
  std::vector<Trial> trials = {Trial{}};
  for (const std::string& part : split(spec, ';')) {
    if (part.empty()) continue;
    const auto eq = part.find('=');
    DT_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < part.size(), InvalidArgument,
             "--search '" << spec << "': '" << part << "' should look like key=v1,v2 (keys: lr, batch, momentum, width)");
    const std::string key = part.substr(0, eq);
    DT_CHECK(key == "lr" || key == "batch" || key == "momentum" || key == "width", InvalidArgument,
             "--search '" << spec << "': unknown key '" << key << "'; use lr, batch, momentum or width");
    std::vector<Trial> next;
    for (const Trial& t : trials)
      for (const std::string& v : split(part.substr(eq + 1), ',')) {
        const double x = number(spec, key, v);
        Trial u = t;
        if (key == "lr") {
          DT_CHECK(x > 0, InvalidArgument, "--search: lr must be > 0, got " << v);
          u.lr = x;
        } else if (key == "momentum") {
          DT_CHECK(x >= 0 && x < 1, InvalidArgument, "--search: momentum must be in [0, 1), got " << v);
          u.momentum = x;
        } else {
          DT_CHECK(x >= 1 && x == std::floor(x), InvalidArgument, "--search: " << key << " must be a positive integer, got " << v);
          (key == "batch" ? u.batch : u.width) = static_cast<int64_t>(x);
        }
        next.push_back(u);
      }
    trials = std::move(next);
  }
  DT_CHECK(!spec.empty(), InvalidArgument, "--search needs a grid such as \"lr=0.1,0.03;batch=64,256\"");
  return trials;
}

std::vector<Trial> random_trials(int64_t n, uint64_t seed) {
  DT_CHECK(n >= 1, InvalidArgument, "--trials must be >= 1");
  data::Rng rng = data::Rng::derive(seed, 0x5ea7c4, 0);
  static const int64_t batches[] = {32, 64, 128, 256};
  static const double momenta[] = {0.0, 0.5, 0.9};
  static const int64_t widths[] = {64, 128, 256, 512};
  std::vector<Trial> out;
  for (int64_t i = 0; i < n; ++i) {
    Trial t;
    t.lr = std::exp(std::log(1e-3) + rng.uniform() * (std::log(0.3) - std::log(1e-3)));
    t.batch = batches[rng.below(4)];
    t.momentum = momenta[rng.below(3)];
    t.width = widths[rng.below(4)];
    out.push_back(t);
  }
  return out;
}

std::vector<int64_t> trials_of_rank(int64_t count, int rank, int world) {
  std::vector<int64_t> out;
  for (int64_t i = rank; i < count; i += world) out.push_back(i);
  return out;
}

std::string apply_width(const std::string& dims, int64_t width) {
  std::vector<std::string> parts = split(dims, '-');
  DT_CHECK(parts.size() >= 2, InvalidArgument, "apply_width: '" << dims << "' is not an MLP spec");
  std::string out = parts.front();
  for (size_t i = 1; i + 1 < parts.size(); ++i) out += "-" + std::to_string(width);
  return out + "-" + parts.back();
}

}  // namespace dtrain
