// python/src/extra_reduce.h — reductions over every element type and reduce op that Python
// callers (NumPy, torch.distributed) use, built on dtrain's collectives.
//
// Contract
// - Elem names the element types of torch/NumPy: the seven dtrain DTypes plus int8, int16
//   and bool. RedOp adds the bitwise ops (band, bor, bxor) to dtrain's sum/avg/prod/min/max.
// - allreduce_ext / reduce_ext / reduce_scatter_ext behave like dtrain's allreduce / reduce /
//   reduce_scatter (same in-place rules, same errors: Desync, PeerFailure, Timeout naming the
//   ranks) for any (Elem, RedOp) pair that makes sense:
//     * a native dtrain type with an arithmetic op goes straight to dtrain;
//     * int8/int16 are widened to int32, reduced, and narrowed back (sums and products wrap
//       modulo 2^8 / 2^16 as C++'s and torch's arithmetic does; avg truncates);
//     * bool is reduced as uint8: sum/max/bor = logical or, prod/min/band = logical and;
//     * band/bor/bxor on integer types (and bxor on bool) all-gather every rank's buffer and
//       fold it in rank order (p x the buffer in scratch memory; these ops are rare).
//   Bitwise ops on floating types, and avg on bool, throw InvalidArgument naming the call.
// - Every rank must call with the same (count, elem, op[, root]) in the same order.
// Thread-safety: like the collectives: one call at a time per communicator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "coll/collectives.h"

namespace dtrain::py {

enum class Elem : uint8_t { kF32, kF64, kF16, kBF16, kI8, kI16, kI32, kI64, kU8, kBool };
enum class RedOp : uint8_t { kSum, kAvg, kProd, kMin, kMax, kBand, kBor, kBxor };

size_t elem_size(Elem e);
const char* elem_name(Elem e);
const char* red_op_name(RedOp op);
RedOp parse_red_op(const std::string& name);  // "sum", "avg"/"mean", "prod"/"product", "min", "max", "band", "bor", "bxor"
// The dtrain DType with the same bytes, when there is one (int8/int16/bool have none).
bool native_dtype(Elem e, DType* out);

void allreduce_ext(Communicator& comm, const void* send, void* recv, size_t count, Elem e, RedOp op,
                   const AllreduceOptions& opts = {});
// recv is written on the root only (may be null elsewhere).
void reduce_ext(Communicator& comm, const void* send, void* recv, size_t count, Elem e, RedOp op, int root,
                const ReduceOptions& opts = {});
// send holds size()*count elements; rank r receives the reduction of block r.
void reduce_scatter_ext(Communicator& comm, const void* send, void* recv, size_t count, Elem e, RedOp op,
                        const ReduceScatterOptions& opts = {});

// All-to-all with per-peer byte counts (MPI's alltoallv): send_bytes[q] bytes at send_offsets[q]
// go to rank q, which receives them at recv_offsets[me]. Point-to-point on the communicator's
// transport with tags of one collective sequence number, bounded by timeout_s.
void alltoallv_bytes(Communicator& comm, const char* send, const size_t* send_bytes, const size_t* send_offsets,
                     char* recv, const size_t* recv_bytes, const size_t* recv_offsets, double timeout_s);

}  // namespace dtrain::py
