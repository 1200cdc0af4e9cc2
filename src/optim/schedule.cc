// optim/schedule.cc — learning-rate schedules and their text form.
#include "optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "base/error.h"

namespace dtrain {

namespace {
constexpr double kPi = 3.14159265358979323846;

// Cosine from `hi` down to `lo` as t goes from 0 to len (held at lo afterwards).
float cosine_between(float hi, float lo, int64_t t, int64_t len) {
  if (len <= 0) return lo;
  double f = static_cast<double>(std::clamp<int64_t>(t, 0, len)) / static_cast<double>(len);
  return static_cast<float>(lo + (hi - lo) * 0.5 * (1.0 + std::cos(kPi * f)));
}
}  // namespace

float LrSchedule::at(int64_t step) const {
  switch (kind) {
    case ScheduleKind::kConstant: return base;
    case ScheduleKind::kStep:
      return static_cast<float>(base * std::pow(static_cast<double>(gamma), static_cast<double>(step / std::max<int64_t>(step_size, 1))));
    case ScheduleKind::kCosine: return cosine_between(base, min, step, total);
    case ScheduleKind::kWarmupCosine:
      if (step < warmup) return base * static_cast<float>(step + 1) / static_cast<float>(warmup);
      return cosine_between(base, min, step - warmup, total - warmup);
  }
  return base;
}

LrSchedule LrSchedule::constant(float base) {
  LrSchedule s;
  s.base = base;
  return s;
}

LrSchedule LrSchedule::step_decay(float base, int64_t step_size, float gamma) {
  DT_CHECK(step_size > 0, InvalidArgument, "step schedule: step_size must be > 0, got " << step_size);
  LrSchedule s = constant(base);
  s.kind = ScheduleKind::kStep;
  s.step_size = step_size;
  s.gamma = gamma;
  return s;
}

LrSchedule LrSchedule::cosine(float base, int64_t total, float min) {
  DT_CHECK(total > 0, InvalidArgument, "cosine schedule: total must be > 0, got " << total);
  LrSchedule s = constant(base);
  s.kind = ScheduleKind::kCosine;
  s.total = total;
  s.min = min;
  return s;
}

LrSchedule LrSchedule::warmup_cosine(float base, int64_t warmup, int64_t total, float min) {
  DT_CHECK(warmup >= 0 && total > warmup, InvalidArgument,
           "warmup_cosine schedule: need 0 <= warmup < total, got warmup " << warmup << ", total " << total);
  LrSchedule s = cosine(base, total, min);
  s.kind = ScheduleKind::kWarmupCosine;
  s.warmup = warmup;
  return s;
}

// "name" or "name:key=value,key=value".
LrSchedule LrSchedule::parse(const std::string& text, float base) {
  std::string name = text.substr(0, text.find(':'));
  std::map<std::string, double> kv;
  if (text.find(':') != std::string::npos) {
    std::stringstream rest(text.substr(text.find(':') + 1));
    std::string item;
    while (std::getline(rest, item, ',')) {
      size_t eq = item.find('=');
      DT_CHECK(eq != std::string::npos, InvalidArgument, "lr schedule '" << text << "': '" << item << "' is not key=value");
      try {
        kv[item.substr(0, eq)] = std::stod(item.substr(eq + 1));
      } catch (const std::exception&) {
        DT_THROW(InvalidArgument, "lr schedule '" << text << "': '" << item << "' has no number");
      }
    }
  }
  auto take = [&](const char* key, double fallback, bool required) {
    auto it = kv.find(key);
    DT_CHECK(it != kv.end() || !required, InvalidArgument, "lr schedule '" << text << "' needs " << key << "=");
    double v = it == kv.end() ? fallback : it->second;
    if (it != kv.end()) kv.erase(it);
    return v;
  };
  LrSchedule s;
  if (name == "constant") {
    s = constant(base);
  } else if (name == "step") {
    int64_t every = static_cast<int64_t>(take("step_size", 0, true));
    s = step_decay(base, every, static_cast<float>(take("gamma", 0.1, false)));
  } else if (name == "cosine") {
    int64_t total = static_cast<int64_t>(take("total", 0, true));
    s = cosine(base, total, static_cast<float>(take("min", 0, false)));
  } else if (name == "warmup_cosine") {
    int64_t warmup = static_cast<int64_t>(take("warmup", 0, true));
    int64_t total = static_cast<int64_t>(take("total", 0, true));
    s = warmup_cosine(base, warmup, total, static_cast<float>(take("min", 0, false)));
  } else {
    DT_THROW(InvalidArgument, "unknown lr schedule '" << name << "' (expected constant, step:step_size=N[,gamma=G], "
                                                      << "cosine:total=N[,min=M], warmup_cosine:warmup=W,total=N[,min=M])");
  }
  DT_CHECK(kv.empty(), InvalidArgument, "lr schedule '" << text << "': unknown key '" << kv.begin()->first << "'");
  return s;
}

std::string LrSchedule::describe() const {
  std::ostringstream os;
  switch (kind) {
    case ScheduleKind::kConstant: os << "constant(" << base << ")"; break;
    case ScheduleKind::kStep: os << "step(" << base << ", every " << step_size << " x" << gamma << ")"; break;
    case ScheduleKind::kCosine: os << "cosine(" << base << " -> " << min << " over " << total << ")"; break;
    case ScheduleKind::kWarmupCosine:
      os << "warmup_cosine(" << warmup << " warmup, " << base << " -> " << min << " by " << total << ")";
      break;
  }
  return os.str();
}

}  // namespace dtrain
