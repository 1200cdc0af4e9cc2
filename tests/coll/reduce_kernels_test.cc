// The reduction kernels against the portable definition, bit for bit: float16 sums widen each
// element to float32 (fp16_to_float), add left to right and round once (float_to_fp16). The
// AVX-512 path (taken where the CPU has it, as here) must give the same bits for every half,
// for subnormals, overflow and NaN (a NaN sum is kHalfNaN whatever the inputs' signs and
// payloads), with the tail past the last 16 elements, and with the CPU flushing denormals
// (the executors run with FTZ/DAZ set).
#include <xmmintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "base/dtype.h"
#include "coll/bytes.h"
#include "coll/reduce_kernels.h"

namespace dtrain {
namespace {

uint16_t reference(const std::vector<const uint16_t*>& srcs, size_t i) {
  float acc = fp16_to_float(srcs[0][i]);
  for (size_t j = 1; j < srcs.size(); ++j) acc += fp16_to_float(srcs[j][i]);
  return acc != acc ? kHalfNaN : float_to_fp16(acc);
}

// Every half value plus each of these, in both orders, through reduce_ordered and reduce_into.
void check_every_half(const char* mode) {
  const uint16_t others[] = {0x0000, 0x8000, 0x3c00, 0x0001, 0x8001, 0x03ff, 0x0400, 0x7bff, 0xfbff,
                             0x7c00, 0xfc00, 0x7e00, 0x7d01, 0xfe55, 0x3555, 0xb800};
  std::vector<uint16_t> all(1 << 16);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  for (uint16_t b : others) {
    std::vector<uint16_t> other(all.size(), b), out(all.size()), into = all;
    std::vector<const uint16_t*> srcs{all.data(), other.data()};
    reduce_ordered(DType::kFloat16, ReduceOp::kSum, out.data(), reinterpret_cast<const void* const*>(srcs.data()), 2,
                   all.size());
    reduce_into(DType::kFloat16, ReduceOp::kSum, into.data(), other.data(), all.size());
    int wrong = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      const uint16_t want = reference(srcs, i);
      if (out[i] != want || into[i] != want) {
        if (++wrong <= 5)
          ADD_FAILURE() << mode << ": 0x" << std::hex << all[i] << " + 0x" << b << ": want 0x" << want
                        << ", ordered 0x" << out[i] << ", into 0x" << into[i];
      }
    }
    EXPECT_EQ(wrong, 0) << mode << " with 0x" << std::hex << b;
  }
}

TEST(ReduceKernels, Float16SumMatchesThePortableDefinitionForEveryHalf) { check_every_half("default"); }

TEST(ReduceKernels, Float16SumMatchesWithDenormalsFlushed) {
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040u);  // FTZ | DAZ, as tensor/denormals.h sets for training
  check_every_half("ftz+daz");
  _mm_setcsr(saved);
}

TEST(ReduceKernels, Float16SumOfManySourcesKeepsTheOrderAndTheTail) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> bits(0, 0xffff);
  for (int k : {1, 3, 5, 8}) {
    for (size_t n : {size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{1000}, size_t{4099}}) {
      std::vector<std::vector<uint16_t>> data(static_cast<size_t>(k), std::vector<uint16_t>(n));
      std::vector<const uint16_t*> srcs;
      for (auto& d : data) {
        for (auto& x : d) x = static_cast<uint16_t>(bits(rng) & 0xbfff);  // mostly finite, both signs
        srcs.push_back(d.data());
      }
      std::vector<uint16_t> out(n);
      reduce_ordered(DType::kFloat16, ReduceOp::kSum, out.data(), reinterpret_cast<const void* const*>(srcs.data()), k, n);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], reference(srcs, i)) << "k " << k << " n " << n << " i " << i;
      // In place: out aliasing the first source.
      std::vector<uint16_t> first = data[0];
      srcs[0] = first.data();
      reduce_ordered(DType::kFloat16, ReduceOp::kSum, first.data(), reinterpret_cast<const void* const*>(srcs.data()), k, n);
      EXPECT_EQ(first, out) << "k " << k << " n " << n;
    }
  }
}

// The cache-bypassing copy equals memcpy for every alignment of both ends and every length
// around its 16-byte head and 64-byte body, and writes nothing outside [dst, dst + n).
TEST(CopyBytesStreaming, EqualsMemcpyAtEveryAlignmentAndLength) {
  std::vector<char> src(4096 + 64), dst(4096 + 128), want(dst.size());
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 131 + 7);
  for (size_t n : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{63}, size_t{64}, size_t{65},
                   size_t{127}, size_t{200}, size_t{4096}})
    for (size_t da = 0; da < 20; ++da)
      for (size_t sa = 0; sa < 3; ++sa) {
        std::fill(dst.begin(), dst.end(), '\x5a');
        want = dst;
        std::memcpy(want.data() + da, src.data() + sa, n);
        copy_bytes_streaming(dst.data() + da, src.data() + sa, n);
        ASSERT_EQ(dst, want) << "n " << n << " dst+" << da << " src+" << sa;
      }
}

}  // namespace
}  // namespace dtrain
