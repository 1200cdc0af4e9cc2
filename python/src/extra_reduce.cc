#include "extra_reduce.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "comm/transport.h"

namespace dtrain::py {

size_t elem_size(Elem e) {
  switch (e) {
    case Elem::kF64: case Elem::kI64: return 8;
    case Elem::kF32: case Elem::kI32: return 4;
    case Elem::kF16: case Elem::kBF16: case Elem::kI16: return 2;
    case Elem::kI8: case Elem::kU8: case Elem::kBool: return 1;
  }
  return 1;
}

const char* elem_name(Elem e) {
  static const char* names[] = {"float32", "float64", "float16", "bfloat16", "int8",
                                "int16",   "int32",   "int64",   "uint8",    "bool"};
  return names[static_cast<int>(e)];
}

const char* red_op_name(RedOp op) {
  static const char* names[] = {"sum", "avg", "prod", "min", "max", "band", "bor", "bxor"};
  return names[static_cast<int>(op)];
}

RedOp parse_red_op(const std::string& n) {
  if (n == "sum") return RedOp::kSum;
  if (n == "avg" || n == "mean") return RedOp::kAvg;
  if (n == "prod" || n == "product") return RedOp::kProd;
  if (n == "min") return RedOp::kMin;
  if (n == "max") return RedOp::kMax;
  if (n == "band") return RedOp::kBand;
  if (n == "bor") return RedOp::kBor;
  if (n == "bxor") return RedOp::kBxor;
  DT_THROW(InvalidArgument, "unknown reduce op '" << n << "' (sum, avg, prod, min, max, band, bor, bxor)");
}

bool native_dtype(Elem e, DType* out) {
  switch (e) {
    case Elem::kF32: *out = DType::kFloat32; return true;
    case Elem::kF64: *out = DType::kFloat64; return true;
    case Elem::kF16: *out = DType::kFloat16; return true;
    case Elem::kBF16: *out = DType::kBFloat16; return true;
    case Elem::kI32: *out = DType::kInt32; return true;
    case Elem::kI64: *out = DType::kInt64; return true;
    case Elem::kU8: case Elem::kBool: *out = DType::kUInt8; return true;
    default: return false;
  }
}

namespace {

bool is_bitwise(RedOp op) { return op == RedOp::kBand || op == RedOp::kBor || op == RedOp::kBxor; }
bool is_float(Elem e) { return e == Elem::kF32 || e == Elem::kF64 || e == Elem::kF16 || e == Elem::kBF16; }

ReduceOp arithmetic(RedOp op) {
  switch (op) {
    case RedOp::kSum: return ReduceOp::kSum;
    case RedOp::kAvg: return ReduceOp::kAvg;
    case RedOp::kProd: return ReduceOp::kProd;
    case RedOp::kMin: return ReduceOp::kMin;
    default: return ReduceOp::kMax;
  }
}

void check_pair(Elem e, RedOp op, const char* call) {
  DT_CHECK(!(is_bitwise(op) && is_float(e)), InvalidArgument,
           call << ": reduce op " << red_op_name(op) << " needs an integer or bool type, got " << elem_name(e));
  DT_CHECK(!(e == Elem::kBool && op == RedOp::kAvg), InvalidArgument, call << ": reduce op avg is undefined on bool");
}

// bool as uint8: or / and are max / min of 0-1 bytes; xor stays bitwise.
RedOp bool_op(RedOp op) {
  switch (op) {
    case RedOp::kSum: case RedOp::kMax: case RedOp::kBor: return RedOp::kMax;
    case RedOp::kProd: case RedOp::kMin: case RedOp::kBand: return RedOp::kMin;
    default: return op;
  }
}

template <class T>
void fold_typed(const char* all, char* out, size_t count, int p, RedOp op) {
  const T* src = reinterpret_cast<const T*>(all);
  T* dst = reinterpret_cast<T*>(out);
  std::memcpy(dst, src, count * sizeof(T));
  for (int r = 1; r < p; ++r) {
    const T* s = src + static_cast<size_t>(r) * count;
    for (size_t i = 0; i < count; ++i) {
      if (op == RedOp::kBand) dst[i] = static_cast<T>(dst[i] & s[i]);
      else if (op == RedOp::kBor) dst[i] = static_cast<T>(dst[i] | s[i]);
      else dst[i] = static_cast<T>(dst[i] ^ s[i]);
    }
  }
}

void fold(const char* all, char* out, size_t count, int p, Elem e, RedOp op) {
  switch (elem_size(e)) {
    case 1: fold_typed<uint8_t>(all, out, count, p, op); break;
    case 2: fold_typed<uint16_t>(all, out, count, p, op); break;
    case 4: fold_typed<uint32_t>(all, out, count, p, op); break;
    default: fold_typed<uint64_t>(all, out, count, p, op); break;
  }
}

template <class Narrow>
void widen(const void* in, int32_t* out, size_t n) {
  const Narrow* s = static_cast<const Narrow*>(in);
  for (size_t i = 0; i < n; ++i) out[i] = s[i];
}
template <class Narrow>
void narrow(const int32_t* in, void* out, size_t n) {
  Narrow* d = static_cast<Narrow*>(out);
  for (size_t i = 0; i < n; ++i) d[i] = static_cast<Narrow>(static_cast<uint32_t>(in[i]));
}

// The shape every *_ext call shares: the reduction of `count` elements into `out` (all ranks).
void allreduce_into(Communicator& comm, const void* send, void* out, size_t count, Elem e, RedOp op,
                    const CollOptions& base) {
  AllreduceOptions opts;
  static_cast<CollOptions&>(opts) = base;
  check_pair(e, op, "allreduce");
  if (e == Elem::kBool) op = bool_op(op);
  if (is_bitwise(op)) {
    const size_t bytes = count * elem_size(e);
    std::vector<char> all(bytes * comm.size());
    AllgatherOptions ag;
    static_cast<CollOptions&>(ag) = base;
    allgather(comm, send, all.data(), bytes, DType::kUInt8, ag);
    fold(all.data(), static_cast<char*>(out), count, comm.size(), e, op);
    return;
  }
  DType t;
  if (native_dtype(e, &t)) {
    allreduce(comm, send, out, count, t, arithmetic(op), opts);
    return;
  }
  std::vector<int32_t> wide(count);
  if (e == Elem::kI8) widen<int8_t>(send, wide.data(), count);
  else widen<int16_t>(send, wide.data(), count);
  allreduce(comm, wide.data(), count, DType::kInt32, arithmetic(op), opts);
  if (e == Elem::kI8) narrow<int8_t>(wide.data(), out, count);
  else narrow<int16_t>(wide.data(), out, count);
}

}  // namespace

void allreduce_ext(Communicator& comm, const void* send, void* recv, size_t count, Elem e, RedOp op,
                   const AllreduceOptions& opts) {
  allreduce_into(comm, send, recv, count, e, op, opts);
}

void reduce_ext(Communicator& comm, const void* send, void* recv, size_t count, Elem e, RedOp op, int root,
                const ReduceOptions& opts) {
  DType t;
  check_pair(e, op, "reduce");
  if (native_dtype(e, &t) && e != Elem::kBool && !is_bitwise(op)) {
    reduce(comm, send, recv, count, t, arithmetic(op), root, opts);
    return;
  }
  // Rare types/ops: an all-reduce into scratch; the root keeps the result.
  std::vector<char> out(count * elem_size(e));
  allreduce_into(comm, send, out.data(), count, e, op, opts);
  if (comm.rank() == root && count) std::memcpy(recv, out.data(), out.size());
}

void reduce_scatter_ext(Communicator& comm, const void* send, void* recv, size_t count, Elem e, RedOp op,
                        const ReduceScatterOptions& opts) {
  DType t;
  check_pair(e, op, "reduce_scatter");
  if (native_dtype(e, &t) && e != Elem::kBool && !is_bitwise(op)) {
    reduce_scatter(comm, send, recv, count, t, arithmetic(op), opts);
    return;
  }
  const size_t block = count * elem_size(e);
  std::vector<char> out(block * comm.size());
  allreduce_into(comm, send, out.data(), count * comm.size(), e, op, opts);
  if (block) std::memcpy(recv, out.data() + block * comm.rank(), block);
}

void alltoallv_bytes(Communicator& comm, const char* send, const size_t* send_bytes, const size_t* send_offsets,
                     char* recv, const size_t* recv_bytes, const size_t* recv_offsets, double timeout_s) {
  const int p = comm.size(), me = comm.rank();
  const uint64_t tag = Communicator::collective_tag(comm.next_sequence(), 0);
  std::vector<Request> reqs;
  reqs.reserve(2 * p);
  for (int k = 0; k < p; ++k) {  // receives first, from me, me-1, ...: every pair meets early
    int q = (me - k + p) % p;
    reqs.push_back(comm.transport().irecv(q, tag, recv + recv_offsets[q], recv_bytes[q]));
  }
  for (int k = 0; k < p; ++k) {
    int q = (me + k) % p;
    reqs.push_back(comm.transport().isend(q, tag, send + send_offsets[q], send_bytes[q]));
  }
  Transport::wait_all(reqs, timeout_s < 0 ? comm.timeout() : timeout_s);
}

}  // namespace dtrain::py
