// allreduce_apply (coll/collectives.h): the owners' transform of the reduced sums lands on
// every rank, each element handed to its owner exactly once, on every path — the slots, the
// cross-memory path (threads of one process read and write with plain copies here; the
// multi-process ddp test covers process_vm_readv/writev), and the reduce-scatter + all-gather
// of the TCP transport — for uneven and empty blocks and sizes of many pieces; a rank in a
// plain all-reduce meanwhile is a Desync naming both calls; in place, and with the inputs in a
// shared-memory window (read where they lie, at the same place on every rank).
#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <span>
#include <numeric>

#include "base/error.h"
#include "coll/collectives.h"
#include "coll/shm_context.h"
#include "support/world.h"

namespace dtrain {
namespace {

float value(int r, size_t i) { return static_cast<float>(1 + (r * 7 + i) % 5); }

// counts: rank q owns counts[q] elements; the transform depends on the element's place, so a
// piece handed over at the wrong offset shows.
// where: 0 send and recv apart, 1 in place, 2 send in a window (recv apart), 3 in place in
// a window (ddp's plain all-reduce), 4 send in a window and recv shared by all ranks (rank
// 0's buffer of a second window: ddp's parameters with its fused ZeRO).
// into_recv: apply writes its results into this rank's recv itself and says so (returns true)
// instead of leaving them in values.
// sum_form (where 4): the owners are handed every rank's input for each piece (apply_sum),
// in rank order where they lie, and apply is never called.
void check_apply(int p, const testing::WorldOptions& w, const std::vector<size_t>& counts, const char* what,
                 int where = 0, bool into_recv = false, bool sum_form = false) {
  const size_t n = std::accumulate(counts.begin(), counts.end(), size_t{0});
  testing::run_world(p, w, [&](Communicator& c) {
    std::unique_ptr<ShmWindow> window, shared;
    if (where >= 2) window = std::make_unique<ShmWindow>(c, (n + 16) * sizeof(float));
    if (where == 4) shared = std::make_unique<ShmWindow>(c, n * sizeof(float));
    for (int round = 0; round < 2; ++round) {  // again, with warm scratch and the next phases
      std::vector<float> own(n), out(n, -1.0f);
      std::span<float> in = window ? std::span<float>(reinterpret_cast<float*>(window->mine()) + 16, n)
                                   : std::span<float>(own);
      for (size_t i = 0; i < n; ++i) in[i] = value(c.rank(), i + round);
      float* recv = where == 1 || where == 3 ? in.data()
                    : where == 4            ? reinterpret_cast<float*>(shared->of(0))
                                            : out.data();
      std::vector<int> seen(n, 0);
      size_t first = 0;
      for (int q = 0; q < c.rank(); ++q) first += counts[q];
      ApplySumFn apply_sum;
      if (sum_form)
        apply_sum = [&](size_t off, const float* const* inputs, int k, size_t len) {
          ASSERT_EQ(k, p);
          for (size_t e = 0; e < len; ++e) {
            EXPECT_GE(off + e, first);
            EXPECT_LT(off + e, first + counts[c.rank()]);
            ++seen[off + e];
            float sum = inputs[0][e];
            for (int q = 1; q < k; ++q) sum += inputs[q][e];
            for (int q = 0; q < k; ++q) ASSERT_EQ(inputs[q][e], value(q, off + e + round)) << "rank " << q << "'s input";
            recv[off + e] = sum * 2.0f + static_cast<float>((off + e) % 1000);
          }
        };
      allreduce_apply(
          c, in.data(), recv, counts,
          [&](size_t off, float* v, size_t len) {
            EXPECT_FALSE(sum_form) << "apply_sum takes every piece";
            for (size_t k = 0; k < len; ++k) {
              EXPECT_GE(off + k, first);
              EXPECT_LT(off + k, first + counts[c.rank()]);
              ++seen[off + k];
              (into_recv ? recv[off + k] : v[k]) = v[k] * 2.0f + static_cast<float>((off + k) % 1000);
            }
            return into_recv;
          },
          {}, window.get(), where == 4, apply_sum);
      for (size_t i = 0; i < n; ++i) {
        float sum = 0;
        for (int r = 0; r < p; ++r) sum += value(r, i + round);
        ASSERT_EQ(recv[i], sum * 2.0f + static_cast<float>(i % 1000)) << what << " p=" << p << " i=" << i;
        const bool mine = i >= first && i < first + counts[c.rank()];
        ASSERT_EQ(seen[i], mine ? 1 : 0) << what << " p=" << p << " i=" << i;
        if (recv != in.data()) {
          ASSERT_EQ(in[i], value(c.rank(), i + round)) << "the input is only read";
        }
      }
      if (where == 4) barrier(c);  // nobody writes the shared recv again before all have read it
    }
  });
}

std::vector<size_t> zero_like(size_t n, int p) {  // ceil(n / p) each, the rest to the last
  std::vector<size_t> counts;
  const size_t per = (n + p - 1) / p;
  size_t left = n;
  for (int q = 0; q < p; ++q) {
    counts.push_back(std::min(per, left));
    left -= counts.back();
  }
  return counts;
}

TEST(AllreduceApply, SlotsDirectAndTcpAgree) {
  testing::WorldOptions slots;
  slots.coll.shm_slots_bytes = size_t{1} << 30;  // every size through the slots
  testing::WorldOptions direct;
  direct.coll.shm_slots_bytes = 0;  // the cross-memory path
  testing::WorldOptions tcp;
  tcp.kind = TransportKind::kTcp;
  for (int p : {1, 2, 3, 4}) {
    for (size_t n : {size_t{1}, size_t{5}, size_t{1000}, size_t{200000}}) {  // 200000: pieces of slots and 256 KiB
      check_apply(p, slots, zero_like(n, p), "slots");
      check_apply(p, direct, zero_like(n, p), "direct");
      if (n <= 1000) check_apply(p, tcp, zero_like(n, p), "tcp");
      check_apply(p, slots, zero_like(n, p), "slots in place", 1);
      check_apply(p, direct, zero_like(n, p), "direct in place", 1);
      check_apply(p, slots, zero_like(n, p), "window", 2);
      check_apply(p, slots, zero_like(n, p), "window in place", 3);
      if (p > 1) check_apply(p, slots, zero_like(n, p), "window, shared recv", 4);
      check_apply(p, slots, zero_like(n, p), "slots, into recv", 0, true);
      check_apply(p, direct, zero_like(n, p), "direct, into recv", 0, true);
      check_apply(p, slots, zero_like(n, p), "window, into recv", 2, true);
      if (p > 1) check_apply(p, slots, zero_like(n, p), "window, shared recv, into recv", 4, true);
      if (p > 1) check_apply(p, slots, zero_like(n, p), "window, shared recv, the inputs as they lie", 4, true, true);
      if (n <= 1000) check_apply(p, tcp, zero_like(n, p), "tcp, into recv", 0, true);
    }
  }
  // Two ranks stated far apart: each owner reduces and applies in its scratch and streams the
  // piece into its slot (ShmContext::streams_to_peers).
  testing::WorldOptions far = slots;
  far.coll.shm_cores = CoreDistance::kFar;
  for (size_t n : {size_t{1}, size_t{5000}, size_t{200000}}) {
    check_apply(2, far, zero_like(n, 2), "slots far");
    check_apply(2, far, zero_like(n, 2), "slots far, into recv", 0, true);
    check_apply(2, far, zero_like(n, 2), "window far", 2);
    check_apply(2, far, zero_like(n, 2), "window far in place", 3);
    check_apply(2, far, zero_like(n, 2), "window far, into recv", 2, true);
  }
  check_apply(3, tcp, zero_like(1000, 3), "tcp in place", 1);
  std::vector<size_t> uneven{0, 70000, 3, 0};  // empty owners, and one much longer than a slot
  check_apply(4, slots, uneven, "slots uneven");
  check_apply(4, direct, uneven, "direct uneven");
  check_apply(4, tcp, uneven, "tcp uneven");
  check_apply(4, slots, uneven, "window uneven", 2);
  check_apply(4, slots, uneven, "window uneven in place", 3);
  check_apply(4, slots, uneven, "window uneven, shared recv", 4);
}

// Every rank must pass the same place of its window: a rank whose input sits elsewhere is
// named on every rank, with both places.
TEST(AllreduceApply, WindowInputsAtDifferentPlacesAreRefused) {
  std::mutex mu;
  std::vector<std::string> errors(2);
  testing::run_world(2, TransportKind::kShm, [&](Communicator& c) {
    ShmWindow w(c, 4096);
    float* in = reinterpret_cast<float*>(w.mine()) + (c.rank() == 1 ? 16 : 0);
    std::vector<float> out(100);
    try {
      allreduce_apply(c, in, out.data(), {50, 50}, [](size_t, float*, size_t) { return false; }, {}, &w);
    } catch (const InvalidArgument& e) {
      std::lock_guard<std::mutex> lock(mu);
      errors[c.rank()] = e.what();
    }
    std::vector<float> apart(100);  // not in the window at all: refused before any phase
    EXPECT_THROW(allreduce_apply(c, apart.data(), out.data(), {50, 50}, [](size_t, float*, size_t) { return false; }, {}, &w),
                 InvalidArgument);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("at byte 64"), std::string::npos) << r << ": " << errors[r];
    EXPECT_NE(errors[r].find("at byte 0"), std::string::npos) << r << ": " << errors[r];
  }
}

TEST(AllreduceApply, ArgumentsAreChecked) {
  testing::run_world(2, TransportKind::kShm, [&](Communicator& c) {
    std::vector<float> buf(8);
    auto nop = [](size_t, float*, size_t) { return false; };
    EXPECT_THROW(allreduce_apply(c, buf.data(), buf.data() + 1, {3, 4}, nop), InvalidArgument);  // overlap
    std::vector<float> out(8);
    EXPECT_THROW(allreduce_apply(c, buf.data(), out.data(), {8}, nop), InvalidArgument);  // one count per rank
  });
}

// One rank in a plain all-reduce of the same length: both name the other's call.
TEST(AllreduceApply, PlainAllreduceMeanwhileIsADesync) {
  std::mutex mu;
  std::vector<std::string> errors(2);
  testing::WorldOptions o;
  o.timeout_s = 20;
  o.coll.shm_slots_bytes = size_t{1} << 30;
  testing::run_world(2, o, [&](Communicator& c) {
    std::vector<float> in(100000, 1.0f), out(100000);
    try {
      if (c.rank() == 0)
        allreduce_apply(c, in.data(), out.data(), {50000, 50000}, [](size_t, float*, size_t) { return false; });
      else
        allreduce(c, in.data(), out.data(), in.size(), DType::kFloat32, ReduceOp::kSum);
    } catch (const Desync& e) {
      std::lock_guard<std::mutex> lock(mu);
      errors[c.rank()] = e.what();
    }
  });
  for (int r = 0; r < 2; ++r) EXPECT_NE(errors[r].find("allreduce+apply(float32 x 100000"), std::string::npos) << r << ": " << errors[r];
}

}  // namespace
}  // namespace dtrain
