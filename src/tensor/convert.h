// tensor/convert.h — bulk float32 <-> bfloat16 / float16 conversion for communication.
//
// Contract: round to nearest even, NaN stays NaN, Inf stays Inf (same rules as base/dtype.h,
// whose scalar helpers these loop over). Sizes of the two spans must match (InvalidArgument
// otherwise). Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>

#include "tensor/tensor.h"

namespace dtrain {

void to_bf16(std::span<const float> in, std::span<uint16_t> out);
void from_bf16(std::span<const uint16_t> in, std::span<float> out);
void to_fp16(std::span<const float> in, std::span<uint16_t> out);
void from_fp16(std::span<const uint16_t> in, std::span<float> out);

// Rounds every element through bf16 / fp16 and back (what a receiver would see).
void round_trip_bf16(std::span<float> x);
void round_trip_fp16(std::span<float> x);

}  // namespace dtrain
