// tests/coll/coll_test_util.h — closed-form inputs and expected results for collective tests.
//
// Rank r's element i is value(r, i, op): small integers (1..5, or 1..2 for prod), so sums and
// products are exact in every type, including bfloat16 (8-bit mantissa) for up to 8 ranks,
// and the expected result can be written down without knowing the reduction order.
#pragma once

#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "coll/types.h"

namespace dtrain::testing {

inline double value(int r, size_t i, ReduceOp op) {
  if (op == ReduceOp::kProd) return (r + i) % 3 == 0 ? 2 : 1;
  return 1 + static_cast<double>((r * 7 + i) % 5);
}

inline void put(DType t, void* p, size_t i, double v) {
  switch (t) {
    case DType::kFloat32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::kFloat64: static_cast<double*>(p)[i] = v; break;
    case DType::kFloat16: static_cast<uint16_t*>(p)[i] = float_to_fp16(static_cast<float>(v)); break;
    case DType::kBFloat16: static_cast<uint16_t*>(p)[i] = float_to_bf16(static_cast<float>(v)); break;
    case DType::kInt32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
    case DType::kInt64: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); break;
    case DType::kUInt8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(static_cast<int64_t>(v) & 0xff); break;
  }
}

// The rank's input: n elements.
inline std::vector<char> input(DType t, int r, size_t n, ReduceOp op = ReduceOp::kSum, size_t first = 0) {
  std::vector<char> v(n * dtype_size(t) + 1);
  for (size_t i = 0; i < n; ++i) put(t, v.data(), i, value(r, first + i, op));
  v.resize(n * dtype_size(t));
  return v;
}

// Expected reduction over ranks 0..p-1 of element i, encoded like the implementation does
// (avg: exact sum / p in float32 for float32 and half types, float64, or integer division).
inline std::vector<char> expected_reduce(DType t, int p, size_t n, ReduceOp op, size_t first = 0) {
  std::vector<char> out(n * dtype_size(t) + 1);
  for (size_t i = 0; i < n; ++i) {
    double acc = value(0, first + i, op);
    for (int r = 1; r < p; ++r) {
      double v = value(r, first + i, op);
      switch (op) {
        case ReduceOp::kSum:
        case ReduceOp::kAvg: acc += v; break;
        case ReduceOp::kProd: acc *= v; break;
        case ReduceOp::kMin: acc = v < acc ? v : acc; break;
        case ReduceOp::kMax: acc = v > acc ? v : acc; break;
      }
    }
    if (op == ReduceOp::kAvg) {
      if (t == DType::kFloat64)
        acc = acc / p;
      else if (t == DType::kInt32 || t == DType::kInt64 || t == DType::kUInt8)
        acc = static_cast<double>(static_cast<int64_t>(acc) / p);
      else
        acc = static_cast<double>(static_cast<float>(acc) / static_cast<float>(p));
    }
    put(t, out.data(), i, acc);
  }
  out.resize(n * dtype_size(t));
  return out;
}

// "" when equal, else where and what differs.
inline std::string compare(const std::vector<char>& got, const std::vector<char>& want, DType t) {
  if (got.size() != want.size()) return "size " + std::to_string(got.size()) + " != " + std::to_string(want.size());
  size_t es = dtype_size(t);
  for (size_t i = 0; i < got.size() / es; ++i) {
    if (std::memcmp(got.data() + i * es, want.data() + i * es, es) != 0) {
      std::ostringstream os;
      os << "first difference at element " << i << " of " << got.size() / es;
      return os.str();
    }
  }
  return "";
}

}  // namespace dtrain::testing
