// The exhaustive sweep (label "slow"): every all-reduce algorithm x world sizes
// {1,2,3,4,5,7,8} x counts {0, 1, p-1, p+1, 1000, 100003} x in-place/out-of-place x every type
// x every reduce op x both transports, plus every reduce-scatter and all-gather algorithm over
// the same grid, with 64-byte segments (4 KiB for the largest count).
#include <gtest/gtest.h>

#include "coll/collectives.h"
#include "coll/cost_model.h"
#include "coll_test_util.h"
#include "support/world.h"

namespace dtrain {
namespace {

using testing::compare;
using testing::expected_reduce;
using testing::input;

const DType kTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                        DType::kInt32,   DType::kInt64,   DType::kUInt8};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax};

class CollectivesSlowTest : public ::testing::TestWithParam<TransportKind> {};

TEST_P(CollectivesSlowTest, FullProduct) {
  for (int p : {1, 2, 3, 4, 5, 7, 8}) {
    testing::run_world(p, GetParam(), [&](Communicator& c) {
      for (size_t n : {size_t{0}, size_t{1}, static_cast<size_t>(p > 1 ? p - 1 : 0), static_cast<size_t>(p + 1),
                       size_t{1000}, size_t{100003}}) {
        for (DType t : kTypes) {
          for (ReduceOp op : kOps) {
            if (n > 1000 && op != ReduceOp::kSum && op != ReduceOp::kAvg) continue;
            const size_t seg = n > 1000 ? 4096 : 64;
            for (Algorithm a : supported_algorithms(CollOp::kAllreduce)) {
              if (a == Algorithm::kHierarchical && n > 1000) continue;
              for (bool in_place : {true, false}) {
                auto mine = input(t, c.rank(), n, op);
                std::vector<char> out(mine.size());
                AllreduceOptions o;
                o.algorithm = a;
                o.segment_bytes = seg;
                allreduce(c, mine.data(), in_place ? mine.data() : out.data(), n, t, op, o);
                ASSERT_EQ(compare(in_place ? mine : out, expected_reduce(t, p, n, op), t), "")
                    << algorithm_name(a) << " p=" << p << " n=" << n << " " << dtype_name(t) << " "
                    << reduce_op_name(op) << (in_place ? " in-place" : "");
              }
            }
            if (n > 1000) continue;
            for (Algorithm a : supported_algorithms(CollOp::kReduceScatter)) {
              auto mine = input(t, c.rank(), n * p, op);
              std::vector<char> out(n * dtype_size(t));
              ReduceScatterOptions o;
              o.algorithm = a;
              o.segment_bytes = seg;
              reduce_scatter(c, mine.data(), out.data(), n, t, op, o);
              ASSERT_EQ(compare(out, expected_reduce(t, p, n, op, c.rank() * n), t), "")
                  << "reduce_scatter " << algorithm_name(a) << " p=" << p << " n=" << n;
            }
            for (Algorithm a : supported_algorithms(CollOp::kAllgather)) {
              std::vector<char> want, out(n * p * dtype_size(t));
              for (int r = 0; r < p; ++r) {
                auto part = input(t, r, n, op);
                want.insert(want.end(), part.begin(), part.end());
              }
              auto mine = input(t, c.rank(), n, op);
              AllgatherOptions o;
              o.algorithm = a;
              o.segment_bytes = seg;
              allgather(c, mine.data(), out.data(), n, t, o);
              ASSERT_EQ(compare(out, want, t), "") << "allgather " << algorithm_name(a) << " p=" << p << " n=" << n;
            }
          }
        }
      }
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, CollectivesSlowTest, ::testing::Values(TransportKind::kShm, TransportKind::kTcp),
                         [](const auto& info) { return std::string(transport_kind_name(info.param)); });

}  // namespace
}  // namespace dtrain
