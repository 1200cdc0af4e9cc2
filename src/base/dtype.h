// base/dtype.h — element types shared by the tensor and communication layers.
//
// Contract: DType names an element type; dtype_size() its width in bytes; dtype_name() the
// short name used in benchmark columns and error messages ("float32", "bfloat16", ...).
// parse_dtype() accepts those names and common aliases (f32, fp16, bf16, int, ...), throwing
// InvalidArgument otherwise. Half types are stored as uint16_t bit patterns; the conversion
// helpers round to nearest even and keep NaN/Inf.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace dtrain {

enum class DType : uint8_t { kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kUInt8 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);
DType parse_dtype(const std::string& name);

inline float bf16_to_float(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x7fffffu)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}
float fp16_to_float(uint16_t h);
uint16_t float_to_fp16(float f);

}  // namespace dtrain
