// nn/init.h — deterministic parameter initialization rules.
//
// Contract: init_fill(init, out, fan_in, fan_out, seed) fills `out` from a SplitMix64 stream
// seeded by `seed`; the same arguments give the same bits everywhere.
//   kZeros, kOnes                constants
//   kUniformFanIn                U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (PyTorch Linear default)
//   kKaimingUniform              U(-sqrt(6/fan_in), sqrt(6/fan_in)) (ReLU gain)
//   kXavierUniform               U(-sqrt(6/(fan_in+fan_out)), +...)
//   kNormal                      N(0, scale^2)
//   kUniform                     U(-scale, scale)
// For a weight of shape (out, in) fan_in = in and fan_out = out; a 1-D bias uses the fans
// of the layer it belongs to (given in Init).
// Thread-safety: pure.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace dtrain {

enum class InitKind { kZeros, kOnes, kUniformFanIn, kKaimingUniform, kXavierUniform, kNormal, kUniform };

struct Init {
  InitKind kind = InitKind::kZeros;
  int64_t fan_in = 1, fan_out = 1;
  float scale = 1.0f;  // kNormal stddev / kUniform bound
};

void init_fill(const Init& init, std::span<float> out, uint64_t seed);
InitKind parse_init(const std::string& name);  // zeros|ones|uniform_fan_in|kaiming|xavier|normal|uniform
const char* init_name(InitKind kind);

}  // namespace dtrain
