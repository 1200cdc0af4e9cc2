// optim/schedule.h — learning-rate schedules, pure functions of the step number.
//
// Contract: at(step) for step = 0, 1, ... is the learning rate of that step.
//   constant      base
//   step          base * gamma^floor(step / step_size)
//   cosine        min + (base - min) * (1 + cos(pi * min(step, total) / total)) / 2
//   warmup_cosine base * (step + 1) / warmup for step < warmup (linear warmup), then
//                 cosine from base to min over the remaining total - warmup steps
// parse("warmup_cosine:warmup=100,total=1000,min=0", base) builds one from text (the CLI's
// --lr-schedule); unknown names or keys throw InvalidArgument listing the valid ones.
// Thread-safety: immutable value type.
#pragma once

#include <cstdint>
#include <string>

namespace dtrain {

enum class ScheduleKind { kConstant, kStep, kCosine, kWarmupCosine };

struct LrSchedule {
  ScheduleKind kind = ScheduleKind::kConstant;
  float base = 0.01f;
  float min = 0.0f;          // cosine floor
  int64_t total = 1;         // cosine length in steps (including warmup)
  int64_t warmup = 0;        // warmup_cosine
  int64_t step_size = 1;     // step
  float gamma = 0.1f;        // step

  float at(int64_t step) const;
  std::string describe() const;

  static LrSchedule constant(float base);
  static LrSchedule step_decay(float base, int64_t step_size, float gamma);
  static LrSchedule cosine(float base, int64_t total, float min = 0.0f);
  static LrSchedule warmup_cosine(float base, int64_t warmup, int64_t total, float min = 0.0f);
  static LrSchedule parse(const std::string& text, float base);
};

}  // namespace dtrain
