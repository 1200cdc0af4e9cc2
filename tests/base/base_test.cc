#include <gtest/gtest.h>

#include <atomic>
#include <numeric>

#include "base/aligned.h"
#include "base/dtype.h"
#include "base/env.h"
#include "base/error.h"
#include "base/thread_pool.h"

namespace dtrain {

TEST(Error, CheckMacrosCarryValuesAndLocation) {
  try {
    int a = 3, b = 4;
    DT_CHECK_EQ(a, b, InvalidArgument, "sizes differ");
    FAIL() << "no throw";
  } catch (const InvalidArgument& e) {
    std::string w = e.what();
    EXPECT_NE(w.find("sizes differ (a = 3, b = 4)"), std::string::npos) << w;
    EXPECT_NE(w.find("base_test.cc:"), std::string::npos) << w;
  }
}

TEST(Error, PeerFailureNamesPeer) {
  PeerFailure e("rank 1 <- rank 2: reset", 2);
  EXPECT_EQ(e.peer(), 2);
  EXPECT_THROW(throw e, Error);
}

TEST(Env, ParseSize) {
  EXPECT_EQ(parse_size("8", "x"), 8);
  EXPECT_EQ(parse_size("64K", "x"), 65536);
  EXPECT_EQ(parse_size("256M", "x"), 256LL << 20);
  EXPECT_EQ(parse_size("1.5K", "x"), 1536);
  EXPECT_THROW(parse_size("12Q", "--sizes"), InvalidArgument);
  EXPECT_THROW(parse_size("abc", "--sizes"), InvalidArgument);
  EXPECT_EQ(format_bytes(64 << 20), "64 MiB");
}

TEST(DType, HalfConversionsRoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 0.000061035156f, 3.140625f}) {
    EXPECT_EQ(fp16_to_float(float_to_fp16(f)), f) << f;
    EXPECT_EQ(bf16_to_float(float_to_bf16(f)), bf16_to_float(float_to_bf16(bf16_to_float(float_to_bf16(f)))));
  }
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(fp16_to_float(float_to_fp16(1.0f + 1.0f / 4096)), 1.0f);  // ties to even
  EXPECT_EQ(parse_dtype("bf16"), DType::kBFloat16);
  EXPECT_THROW(parse_dtype("complex"), InvalidArgument);
  EXPECT_EQ(dtype_size(DType::kFloat64), 8u);
}

TEST(Aligned, OwnLinesStartOnALineAndFillWholeLines) {
  for (size_t n : {size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{20}, size_t{100}}) {
    AlignedVector<float> v = own_lines<float>(n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % kCacheLine, 0u) << n;
    EXPECT_GE(v.size(), n);
    EXPECT_LT(v.size(), n + kCacheLine / sizeof(float)) << n;
    EXPECT_EQ(v.size() * sizeof(float) % kCacheLine, 0u) << n;  // nothing else can share its last line
  }
  AlignedVector<double> d = own_lines<double>(3);
  EXPECT_EQ(d.size(), kCacheLine / sizeof(double));
}

TEST(ThreadPool, CoversRangeExactlyOnce) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    std::vector<std::atomic<int>> hits(1003);
    for (int rep = 0; rep < 20; ++rep) {
      pool.parallel_for(0, 1003, 10, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) hits[i]++;
      });
    }
    for (auto& h : hits) ASSERT_EQ(h.load(), 20);
  }
}

TEST(ThreadPool, RethrowsFirstError) {
  ThreadPool pool(3);
  EXPECT_THROW(pool.parallel_for(0, 100, 1,
                                 [](int64_t lo, int64_t) {
                                   if (lo > 0) throw InvalidArgument("boom");
                                 }),
               InvalidArgument);
  int sum = 0;
  pool.parallel_for(0, 10, 100, [&](int64_t lo, int64_t hi) { sum += static_cast<int>(hi - lo); });
  EXPECT_EQ(sum, 10);
}

}  // namespace dtrain
