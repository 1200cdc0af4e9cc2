// tensor/convert.cc — bulk half-precision conversion. bf16 goes through the SIMD kernel table
// (bit-identical to base/dtype.h's helpers); fp16 loops over base/dtype.h's scalar helpers.
#include "tensor/convert.h"

#include <algorithm>

#include "base/dtype.h"
#include "base/error.h"
#include "tensor/kernels.h"

namespace dtrain {

namespace {
void check_sizes(size_t a, size_t b, const char* what) {
  DT_CHECK(a == b, InvalidArgument, what << ": input has " << a << " elements, output " << b);
}
}  // namespace

void to_bf16(std::span<const float> in, std::span<uint16_t> out) {
  check_sizes(in.size(), out.size(), "to_bf16");
  kernels().to_bf16(in.data(), out.data(), static_cast<int64_t>(in.size()));
}
void from_bf16(std::span<const uint16_t> in, std::span<float> out) {
  check_sizes(in.size(), out.size(), "from_bf16");
  kernels().from_bf16(in.data(), out.data(), static_cast<int64_t>(in.size()));
}
void to_fp16(std::span<const float> in, std::span<uint16_t> out) {
  check_sizes(in.size(), out.size(), "to_fp16");
  for (size_t i = 0; i < in.size(); ++i) out[i] = float_to_fp16(in[i]);
}
void from_fp16(std::span<const uint16_t> in, std::span<float> out) {
  check_sizes(in.size(), out.size(), "from_fp16");
  for (size_t i = 0; i < in.size(); ++i) out[i] = fp16_to_float(in[i]);
}
// In blocks, so the temporary stays in L1.
void round_trip_bf16(std::span<float> x) {
  uint16_t block[1024];
  for (size_t i = 0; i < x.size(); i += 1024) {
    int64_t n = static_cast<int64_t>(std::min<size_t>(1024, x.size() - i));
    kernels().to_bf16(x.data() + i, block, n);
    kernels().from_bf16(block, x.data() + i, n);
  }
}
void round_trip_fp16(std::span<float> x) {
  for (float& v : x) v = fp16_to_float(float_to_fp16(v));
}

}  // namespace dtrain
