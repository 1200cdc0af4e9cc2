// coll/types.h — the vocabulary of the collectives: reduce ops, algorithms, option structs.
//
// Contract
// - ReduceOp: sum, avg (sum then divide by the group size once, at the end; integer types
//   truncate), prod, min, max. Half types (float16, bfloat16) are computed in float32.
// - Algorithm names one way to run a collective; kAuto asks the cost model (coll/cost_model.h).
//   parse_algorithm accepts the names algorithm_name prints plus a few aliases.
// - Every collective takes one small options struct derived from CollOptions:
//     algorithm      forced algorithm, or kAuto (then DTRAIN_<OP>_ALGO / DTRAIN_ALGO apply)
//     timeout_s      bound on the whole call; kDefaultTimeout (base/clock.h): the communicator's
//     segment_bytes  pipelining unit; 0 means DTRAIN_SEGMENT_BYTES or 1 MiB
//     deterministic  fixed reduction order (rank 0, 1, ..., p-1, accumulated in the widest
//                    type): bit-identical results whatever the algorithm or segment size
//     check          exchange the call's fingerprint with the ring neighbours first, so a
//                    mismatched call is a Desync error (on by default; DTRAIN_COLL_CHECK=0)
//     shm            optional ShmContext (coll/shm_context.h) of this communicator: enables
//                    the shared-memory fast paths (every rank must pass one, or none)
// Thread-safety: plain values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/clock.h"
#include "base/dtype.h"

namespace dtrain {

enum class ReduceOp : uint8_t { kSum, kAvg, kProd, kMin, kMax };
const char* reduce_op_name(ReduceOp op);
ReduceOp parse_reduce_op(const std::string& name);

enum class Algorithm : uint8_t {
  kAuto,
  kNaive,              // direct: every rank talks to every rank
  kRing,               // ring (reduce-scatter + all-gather for all-reduce)
  kTree,               // binomial tree, pipelined in segments
  kButterfly,          // recursive doubling (small) or halving-doubling (large), by cost
  kRecursiveDoubling,  // butterfly, whole buffer each round
  kHalvingDoubling,    // Rabenseifner: recursive halving reduce-scatter + doubling all-gather
  kParamServer,        // reduce to one root, then broadcast from it
  kShmDirect,          // each rank reduces its slice straight from shared-memory copies
  kHierarchical,       // intra-host reduce, leaders all-reduce, intra-host broadcast
  kChain,              // pipelined chain (broadcast)
  kBruck,              // Bruck all-gather
  kBinomial,           // binomial tree (broadcast, reduce, gather, scatter)
  kPairwise,           // pairwise exchange (all-to-all)
  kDissemination,      // barrier
};
const char* algorithm_name(Algorithm a);
Algorithm parse_algorithm(const std::string& name);

enum class CollOp : uint8_t {
  kAllreduce, kBroadcast, kReduce, kAllgather, kReduceScatter, kGather, kScatter, kAlltoall, kBarrier
};
const char* coll_op_name(CollOp op);
CollOp parse_coll_op(const std::string& name);

class ShmContext;
class ShmWindow;

struct CollOptions {
  Algorithm algorithm = Algorithm::kAuto;
  double timeout_s = kDefaultTimeout;
  size_t segment_bytes = 0;
  bool deterministic = false;
  bool check = true;
  ShmContext* shm = nullptr;
};
struct AllreduceOptions : CollOptions {};
struct BroadcastOptions : CollOptions {};
struct ReduceOptions : CollOptions {};
struct AllgatherOptions : CollOptions {};
struct ReduceScatterOptions : CollOptions {
  // The caller gives up its send buffer: it must be writable, and what it holds after the
  // call is unspecified. The message-path algorithms (ring, halving, direct) then reduce in
  // it instead of a working copy of the whole input, which they otherwise lease for the call
  // (ZeRO's gradient bucket: one model-size copy fewer a rank over tcp). Shared-memory paths
  // read it in place either way.
  bool scratch_send = false;
};
struct GatherOptions : CollOptions {};
struct ScatterOptions : CollOptions {};
struct AlltoallOptions : CollOptions {};
struct BarrierOptions : CollOptions {};

// A typed byte span: `count` elements of `dtype` at `data`.
struct Buf {
  void* data = nullptr;
  size_t count = 0;
  DType dtype = DType::kFloat32;
  size_t bytes() const { return count * dtype_size(dtype); }
};
struct CBuf {
  const void* data = nullptr;
  size_t count = 0;
  DType dtype = DType::kFloat32;
  size_t bytes() const { return count * dtype_size(dtype); }
};

}  // namespace dtrain
