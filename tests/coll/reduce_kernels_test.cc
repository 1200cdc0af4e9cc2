// The reduction kernels against the portable definition, bit for bit: float16 sums widen each
// element to float32 (fp16_to_float), add left to right and round once (float_to_fp16). The
// vector path (AVX-512 or AVX2 + F16C, whichever the CPU has) must give the same bits for every half,
// for subnormals, overflow and NaN (a NaN sum is kHalfNaN whatever the inputs' signs and
// payloads), with the tail past the last 16 elements, and with the CPU flushing denormals
// (the executors run with FTZ/DAZ set).
#include <xmmintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/dtype.h"
#include "base/settings.h"
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

// float32 sums and kAvg's division take the widest vector path the CPU has (AVX-512, AVX2, or
// the portable loop): each must give the bits of adding left to right in float32, one rounding
// per addition (no fusing, no reassociation), at every length around the vectors' widths, with
// the output aliasing the first source, and through reduce_into (dst + src in that order).
// Values of mixed signs and magnitudes, so that another order of the additions shows.
TEST(ReduceKernels, Float32SumAddsLeftToRightAtEveryLength) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-20, 20);
  for (int k : {1, 2, 3, 5, 8, 9}) {
    for (size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{31}, size_t{32}, size_t{33}, size_t{47},
                     size_t{1000}, size_t{4099}}) {
      std::vector<std::vector<float>> data(static_cast<size_t>(k), std::vector<float>(n));
      std::vector<const float*> srcs;
      for (auto& d : data) {
        for (auto& x : d) x = std::ldexp(mant(rng), expo(rng));
        srcs.push_back(d.data());
      }
      std::vector<float> want(n), out(n);
      for (size_t i = 0; i < n; ++i) {
        volatile float acc = srcs[0][i];  // volatile: one rounding per addition, in this order
        for (int j = 1; j < k; ++j) acc = acc + srcs[static_cast<size_t>(j)][i];
        want[i] = acc;
      }
      reduce_ordered(DType::kFloat32, ReduceOp::kSum, out.data(), reinterpret_cast<const void* const*>(srcs.data()), k, n);
      ASSERT_EQ(0, std::memcmp(out.data(), want.data(), n * sizeof(float))) << "k " << k << " n " << n;
      std::vector<float> first = data[0];
      srcs[0] = first.data();
      reduce_ordered(DType::kFloat32, ReduceOp::kAvg, first.data(), reinterpret_cast<const void* const*>(srcs.data()), k, n);
      ASSERT_EQ(0, std::memcmp(first.data(), want.data(), n * sizeof(float))) << "in place, k " << k << " n " << n;
      if (k == 2) {
        std::vector<float> into = data[0];
        reduce_into(DType::kFloat32, ReduceOp::kSum, into.data(), data[1].data(), n);
        ASSERT_EQ(0, std::memcmp(into.data(), want.data(), n * sizeof(float))) << "into, n " << n;
      }
    }
  }
}

TEST(ReduceKernels, Float32AverageDividesEveryElement) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> val(-1e6f, 1e6f);
  for (int p : {1, 2, 3, 4, 7, 8}) {
    for (size_t n : {size_t{1}, size_t{8}, size_t{15}, size_t{16}, size_t{17}, size_t{1001}}) {
      std::vector<float> x(n);
      for (auto& v : x) v = val(rng);
      std::vector<float> want = x;
      for (auto& v : want) v = v / static_cast<float>(p);  // x * (1/p) is the same for a power of two
      finish_avg(DType::kFloat32, x.data(), n, p);
      ASSERT_EQ(0, std::memcmp(x.data(), want.data(), n * sizeof(float))) << "p " << p << " n " << n;
    }
  }
}

// DTRAIN_ISA caps the sums' kernels as it caps tensor/'s. ctest runs this whole file three
// times: as the CPU allows, under DTRAIN_ISA=avx2 and under DTRAIN_ISA=generic, so the portable
// loops and the AVX2 path are checked on an AVX-512 machine too.
TEST(ReduceKernels, IsaHonoursTheCap) {
  const std::string isa = reduce_kernels_isa();
  const Settings& settings = Settings::process();
  const std::string cap = settings.has("DTRAIN_ISA") ? settings.choice("DTRAIN_ISA") : "";
  if (cap == "generic") {
    EXPECT_EQ(isa, "generic");
  }
  if (cap == "avx2") {
    EXPECT_NE(isa, "avx512");
  }
  EXPECT_TRUE(isa == "generic" || isa == "avx2" || isa == "avx512") << isa;
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
