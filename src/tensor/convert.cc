// tensor/convert.cc — bulk half-precision conversion (loops over base/dtype.h's helpers,
// which the compiler inlines; bandwidth-bound either way).
#include "tensor/convert.h"

#include "base/dtype.h"
#include "base/error.h"

namespace dtrain {

namespace {
void check_sizes(size_t a, size_t b, const char* what) {
  DT_CHECK(a == b, InvalidArgument, what << ": input has " << a << " elements, output " << b);
}
}  // namespace

void to_bf16(std::span<const float> in, std::span<uint16_t> out) {
  check_sizes(in.size(), out.size(), "to_bf16");
  for (size_t i = 0; i < in.size(); ++i) out[i] = float_to_bf16(in[i]);
}
void from_bf16(std::span<const uint16_t> in, std::span<float> out) {
  check_sizes(in.size(), out.size(), "from_bf16");
  for (size_t i = 0; i < in.size(); ++i) out[i] = bf16_to_float(in[i]);
}
void to_fp16(std::span<const float> in, std::span<uint16_t> out) {
  check_sizes(in.size(), out.size(), "to_fp16");
  for (size_t i = 0; i < in.size(); ++i) out[i] = float_to_fp16(in[i]);
}
void from_fp16(std::span<const uint16_t> in, std::span<float> out) {
  check_sizes(in.size(), out.size(), "from_fp16");
  for (size_t i = 0; i < in.size(); ++i) out[i] = fp16_to_float(in[i]);
}
void round_trip_bf16(std::span<float> x) {
  for (float& v : x) v = bf16_to_float(float_to_bf16(v));
}
void round_trip_fp16(std::span<float> x) {
  for (float& v : x) v = fp16_to_float(float_to_fp16(v));
}

}  // namespace dtrain
