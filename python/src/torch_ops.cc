// The collectives of ProcessGroupDtrain: each checks its arguments on the caller's thread,
// stages strided tensors into contiguous copies, and queues a body that runs dtrain's
// collective on the progress thread and copies results back into the caller's tensors.
// Data movement that does not reduce (broadcast, gathers, scatters, all-to-all) moves raw
// bytes, so every dtype works; reductions go through extra_reduce.h.
#include <cstring>
#include <numeric>

#include "coll/collectives.h"
#include "torch_backend.h"
#include "torch_tensor_util.h"

namespace dtrain::py {

namespace {

template <class O>
O with_timeout(std::chrono::milliseconds t, double fallback) {
  O o;
  o.timeout_s = timeout_of(t, fallback);
  return o;
}

void check_list(const std::vector<at::Tensor>& ts, size_t n, const at::Tensor& like, const char* call) {
  DT_CHECK(ts.size() == n, InvalidArgument, call << ": expected a list of " << n << " tensors (got " << ts.size() << ")");
  for (const auto& t : ts) {
    check_cpu(t, call);
    DT_CHECK(t.numel() == like.numel() && t.scalar_type() == like.scalar_type(), InvalidArgument,
             call << ": every tensor of the list must have " << like.numel() << " elements of " << like.scalar_type()
                  << " (got " << t.numel() << " of " << t.scalar_type() << ")");
  }
}

// Copies block r of the contiguous scratch into each tensor of the list.
void scatter_blocks(const at::Tensor& flat, std::vector<at::Tensor>& outs) {
  for (size_t r = 0; r < outs.size(); ++r) outs[r].copy_(flat[r].view(outs[r].sizes()));
}

// Fills t (any layout) from t.numel() packed elements at src.
void copy_bytes_into(at::Tensor& t, const char* src) {
  const size_t b = t.numel() * t.element_size();
  if (t.is_contiguous()) {
    if (b) std::memcpy(t.data_ptr(), src, b);
    return;
  }
  at::Tensor tmp = at::empty(t.sizes(), t.options());
  if (b) std::memcpy(tmp.data_ptr(), src, b);
  t.copy_(tmp);
}

}  // namespace

#define DT_PG_TRY(call, ...)          \
  try {                               \
    __VA_ARGS__                       \
  } catch (...) {                     \
    rethrow_with_prefix(prefix(call)); \
  }

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::allreduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  Staged s;
  Elem e{};
  RedOp op{};
  DT_PG_TRY("all_reduce", check_one(tensors, "all_reduce"); e = elem_of(tensors[0], "all_reduce");
            op = red_op(opts.reduceOp, "all_reduce"); s = Staged(tensors[0]);)
  auto o = with_timeout<AllreduceOptions>(opts.timeout, timeout_s_);
  return enqueue(c10d::OpType::ALLREDUCE, "all_reduce", tensors, [s, e, op, o](Communicator& c) mutable {
    allreduce_ext(c, s.ptr(), s.ptr(), s.elems(), e, op, o);
    s.finish();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                       const c10d::AllreduceCoalescedOptions& opts) {
  // One all-reduce over the tensors packed end to end (they must share a dtype, as in gloo).
  at::Tensor flat;
  Elem e{};
  RedOp op{};
  DT_PG_TRY("all_reduce_coalesced", DT_CHECK(!tensors.empty(), InvalidArgument, "no tensors");
            for (const auto& t : tensors) {
              check_cpu(t, "all_reduce_coalesced");
              DT_CHECK(t.scalar_type() == tensors[0].scalar_type(), InvalidArgument,
                       "all tensors must have one dtype (" << tensors[0].scalar_type() << " and " << t.scalar_type() << ")");
            } e = elem_of(tensors[0], "all_reduce_coalesced");
            op = red_op(opts.reduceOp, "all_reduce_coalesced"); std::vector<at::Tensor> parts;
            for (const auto& t : tensors) parts.push_back(t.reshape(-1));
            flat = at::cat(parts);)
  auto o = with_timeout<AllreduceOptions>(opts.timeout, timeout_s_);
  return enqueue(c10d::OpType::ALLREDUCE_COALESCED, "all_reduce_coalesced", tensors,
                 [flat, tensors, e, op, o](Communicator& c) mutable {
                   allreduce_ext(c, flat.data_ptr(), flat.data_ptr(), elems_of(flat), e, op, o);
                   int64_t pos = 0;
                   for (auto& t : tensors) {
                     t.copy_(flat.narrow(0, pos, t.numel()).view(t.sizes()));
                     pos += t.numel();
                   }
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::broadcast(std::vector<at::Tensor>& tensors,
                                                             const c10d::BroadcastOptions& opts) {
  Staged s;
  DT_PG_TRY("broadcast", check_one(tensors, "broadcast"); s = Staged(tensors[0]);)
  auto o = with_timeout<BroadcastOptions>(opts.timeout, timeout_s_);
  int root = static_cast<int>(opts.rootRank);
  return enqueue(c10d::OpType::BROADCAST, "broadcast", tensors, [s, o, root](Communicator& c) mutable {
    dtrain::broadcast(c, s.ptr(), s.bytes(), DType::kUInt8, root, o);
    s.finish();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::reduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::ReduceOptions& opts) {
  Staged s;
  Elem e{};
  RedOp op{};
  DT_PG_TRY("reduce", check_one(tensors, "reduce"); e = elem_of(tensors[0], "reduce");
            op = red_op(opts.reduceOp, "reduce"); s = Staged(tensors[0]);)
  auto o = with_timeout<ReduceOptions>(opts.timeout, timeout_s_);
  int root = static_cast<int>(opts.rootRank);
  return enqueue(c10d::OpType::REDUCE, "reduce", tensors, [s, e, op, o, root](Communicator& c) mutable {
    const bool me = c.rank() == root;
    reduce_ext(c, s.ptr(), me ? s.ptr() : nullptr, s.elems(), e, op, root, o);
    if (me) s.finish();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                             std::vector<at::Tensor>& inputs,
                                                             const c10d::AllgatherOptions& opts) {
  Staged in;
  DT_PG_TRY("all_gather", check_one(inputs, "all_gather");
            DT_CHECK(outputs.size() == 1, InvalidArgument, "expected one output list");
            check_list(outputs[0], getSize(), inputs[0], "all_gather"); in = Staged(inputs[0]);)
  auto o = with_timeout<AllgatherOptions>(opts.timeout, timeout_s_);
  auto outs = outputs[0];
  return enqueue(c10d::OpType::ALLGATHER, "all_gather", outs, [in, outs, o](Communicator& c) mutable {
    at::Tensor flat = stacked_like(in.buf, c.size());
    dtrain::allgather(c, in.ptr(), flat.data_ptr(), in.bytes(), DType::kUInt8, o);
    scatter_blocks(flat, outs);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                   const c10d::AllgatherOptions& opts) {
  Staged out, in;
  DT_PG_TRY("all_gather_into_tensor", check_cpu(output, "all_gather_into_tensor");
            check_cpu(input, "all_gather_into_tensor");
            DT_CHECK(output.numel() == input.numel() * getSize() && output.scalar_type() == input.scalar_type(),
                     InvalidArgument, "output must hold " << getSize() << " x the input's " << input.numel() << " "
                                                          << input.scalar_type() << " elements (got " << output.numel()
                                                          << " " << output.scalar_type() << ")");
            out = Staged(output); in = Staged(input);)
  auto o = with_timeout<AllgatherOptions>(opts.timeout, timeout_s_);
  return enqueue(c10d::OpType::_ALLGATHER_BASE, "all_gather_into_tensor", {output},
                 [out, in, o](Communicator& c) mutable {
                   dtrain::allgather(c, in.ptr(), out.ptr(), in.bytes(), DType::kUInt8, o);  // in place when in is
                   out.finish();                                                           // out's block `rank`
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                                       std::vector<at::Tensor>& inputs,
                                                                       const c10d::AllgatherOptions& opts) {
  // outputs[r][j] receives rank r's inputs[j]: one all-gather of the inputs packed as bytes.
  at::Tensor packed;
  DT_PG_TRY("all_gather_coalesced",
            DT_CHECK(outputs.size() == static_cast<size_t>(getSize()), InvalidArgument,
                     "expected " << getSize() << " output lists (got " << outputs.size() << ")");
            std::vector<at::Tensor> parts; for (const auto& t : inputs) {
              check_cpu(t, "all_gather_coalesced");
              parts.push_back(t.contiguous().reshape(-1).view(at::kByte));
            } for (const auto& l : outputs) DT_CHECK(l.size() == inputs.size(), InvalidArgument,
                                                     "each output list must have " << inputs.size() << " tensors");
            packed = parts.empty() ? at::empty({0}, at::kByte) : at::cat(parts);)
  auto o = with_timeout<AllgatherOptions>(opts.timeout, timeout_s_);
  std::vector<at::Tensor> flat_outs;
  for (auto& l : outputs) flat_outs.insert(flat_outs.end(), l.begin(), l.end());
  auto outs = outputs;
  return enqueue(c10d::OpType::ALLGATHER_COALESCED, "all_gather_coalesced", flat_outs,
                 [packed, outs, o](Communicator& c) mutable {
                   const int64_t n = packed.numel();
                   at::Tensor all = at::empty({n * c.size()}, at::kByte);
                   dtrain::allgather(c, packed.data_ptr(), all.data_ptr(), n, DType::kUInt8, o);
                   for (int r = 0; r < c.size(); ++r) {
                     const char* src = static_cast<const char*>(all.data_ptr()) + r * n;
                     for (auto& t : outs[r]) {
                       copy_bytes_into(t, src);
                       src += t.numel() * t.element_size();
                     }
                   }
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::GatherOptions& opts) {
  Staged in;
  const int root = static_cast<int>(opts.rootRank);
  const bool me = getRank() == root;
  DT_PG_TRY("gather", check_one(inputs, "gather"); if (me) {
    DT_CHECK(outputs.size() == 1, InvalidArgument, "the root needs one output list");
    check_list(outputs[0], getSize(), inputs[0], "gather");
  } else DT_CHECK(outputs.empty() || outputs[0].empty(), InvalidArgument, "only the root takes an output list");
            in = Staged(inputs[0]);)
  auto o = with_timeout<GatherOptions>(opts.timeout, timeout_s_);
  std::vector<at::Tensor> outs = me ? outputs[0] : std::vector<at::Tensor>{};
  return enqueue(c10d::OpType::GATHER, "gather", outs, [in, outs, o, root, me](Communicator& c) mutable {
    at::Tensor flat = me ? stacked_like(in.buf, c.size()) : at::Tensor();
    dtrain::gather(c, in.ptr(), me ? flat.data_ptr() : nullptr, in.bytes(), DType::kUInt8, root, o);
    if (me) scatter_blocks(flat, outs);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::scatter(std::vector<at::Tensor>& outputs,
                                                           std::vector<std::vector<at::Tensor>>& inputs,
                                                           const c10d::ScatterOptions& opts) {
  Staged out;
  at::Tensor flat;
  const int root = static_cast<int>(opts.rootRank);
  const bool me = getRank() == root;
  DT_PG_TRY("scatter", check_one(outputs, "scatter"); if (me) {
    DT_CHECK(inputs.size() == 1, InvalidArgument, "the root needs one input list");
    check_list(inputs[0], getSize(), outputs[0], "scatter");
    flat = at::stack(inputs[0]).contiguous();
  } else DT_CHECK(inputs.empty() || inputs[0].empty(), InvalidArgument, "only the root takes an input list");
            out = Staged(outputs[0]);)
  auto o = with_timeout<ScatterOptions>(opts.timeout, timeout_s_);
  return enqueue(c10d::OpType::SCATTER, "scatter", outputs, [out, flat, o, root, me](Communicator& c) mutable {
    dtrain::scatter(c, me ? flat.data_ptr() : nullptr, out.ptr(), out.bytes(), DType::kUInt8, root, o);
    out.finish();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                  std::vector<std::vector<at::Tensor>>& inputs,
                                                                  const c10d::ReduceScatterOptions& opts) {
  Staged out;
  at::Tensor flat;
  Elem e{};
  RedOp op{};
  DT_PG_TRY("reduce_scatter", check_one(outputs, "reduce_scatter");
            DT_CHECK(inputs.size() == 1, InvalidArgument, "expected one input list");
            check_list(inputs[0], getSize(), outputs[0], "reduce_scatter"); e = elem_of(outputs[0], "reduce_scatter");
            op = red_op(opts.reduceOp, "reduce_scatter"); flat = at::stack(inputs[0]).contiguous();
            out = Staged(outputs[0]);)
  auto o = with_timeout<ReduceScatterOptions>(opts.timeout, timeout_s_);
  return enqueue(c10d::OpType::REDUCE_SCATTER, "reduce_scatter", outputs, [out, flat, e, op, o](Communicator& c) mutable {
    reduce_scatter_ext(c, flat.data_ptr(), out.ptr(), out.elems(), e, op, o);
    out.finish();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                        const c10d::ReduceScatterOptions& opts) {
  Staged out, in;
  Elem e{};
  RedOp op{};
  DT_PG_TRY("reduce_scatter_tensor", check_cpu(output, "reduce_scatter_tensor");
            check_cpu(input, "reduce_scatter_tensor");
            DT_CHECK(input.numel() == output.numel() * getSize() && output.scalar_type() == input.scalar_type(),
                     InvalidArgument, "input must hold " << getSize() << " x the output's " << output.numel() << " "
                                                         << output.scalar_type() << " elements (got " << input.numel()
                                                         << " " << input.scalar_type() << ")");
            e = elem_of(output, "reduce_scatter_tensor"); op = red_op(opts.reduceOp, "reduce_scatter_tensor");
            out = Staged(output); in = Staged(input);)
  auto o = with_timeout<ReduceScatterOptions>(opts.timeout, timeout_s_);
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor", {output},
                 [out, in, e, op, o](Communicator& c) mutable {
                   reduce_scatter_ext(c, in.ptr(), out.ptr(), out.elems(), e, op, o);
                   out.finish();
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                 std::vector<int64_t>& output_splits,
                                                                 std::vector<int64_t>& input_splits,
                                                                 const c10d::AllToAllOptions& opts) {
  Staged out, in;
  std::vector<size_t> sb, so, rb, ro;
  const int p = getSize();
  DT_PG_TRY("all_to_all_single", check_cpu(output, "all_to_all_single"); check_cpu(input, "all_to_all_single");
            DT_CHECK(output.scalar_type() == input.scalar_type(), InvalidArgument, "input and output dtypes differ");
            out = Staged(output); in = Staged(input);
            auto plan = [&](const at::Tensor& t, const std::vector<int64_t>& splits, std::vector<size_t>& bytes,
                            std::vector<size_t>& offs, const char* which) {
              const int64_t rows = t.dim() ? t.size(0) : 1;
              const size_t row_bytes = rows ? t.numel() * t.element_size() / rows : 0;
              if (splits.empty()) {
                DT_CHECK(rows % p == 0, InvalidArgument,
                         which << " has " << rows << " rows, not divisible by the group size " << p);
                bytes.assign(p, row_bytes * (rows / p));
              } else {
                DT_CHECK(splits.size() == static_cast<size_t>(p), InvalidArgument,
                         which << " splits need " << p << " entries (got " << splits.size() << ")");
                DT_CHECK(std::accumulate(splits.begin(), splits.end(), int64_t{0}) == rows, InvalidArgument,
                         which << " splits do not add up to its " << rows << " rows");
                for (auto s : splits) bytes.push_back(row_bytes * s);
              }
              size_t pos = 0;
              for (size_t b : bytes) {
                offs.push_back(pos);
                pos += b;
              }
            };
            plan(input, input_splits, sb, so, "input"); plan(output, output_splits, rb, ro, "output");)
  const double to = timeout_of(opts.timeout, timeout_s_);
  return enqueue(c10d::OpType::ALLTOALL_BASE, "all_to_all_single", {output},
                 [out, in, sb, so, rb, ro, to](Communicator& c) mutable {
                   alltoallv_bytes(c, static_cast<const char*>(in.ptr()), sb.data(), so.data(),
                                   static_cast<char*>(out.ptr()), rb.data(), ro.data(), to);
                   out.finish();
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::alltoall(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllToAllOptions& opts) {
  // Block q of the inputs goes to rank q; block q of the outputs comes from it. Sizes may differ.
  at::Tensor send;
  std::vector<size_t> sb, so, rb, ro;
  const int p = getSize();
  DT_PG_TRY("all_to_all", DT_CHECK(inputs.size() == static_cast<size_t>(p) && outputs.size() == static_cast<size_t>(p),
                                   InvalidArgument, "expected " << p << " input and output tensors");
            std::vector<at::Tensor> parts; size_t pos = 0; for (const auto& t : inputs) {
              check_cpu(t, "all_to_all");
              parts.push_back(t.contiguous().reshape(-1).view(at::kByte));
              sb.push_back(t.numel() * t.element_size());
              so.push_back(pos);
              pos += sb.back();
            } send = parts.empty() ? at::empty({0}, at::kByte) : at::cat(parts);
            pos = 0; for (const auto& t : outputs) {
              check_cpu(t, "all_to_all");
              rb.push_back(t.numel() * t.element_size());
              ro.push_back(pos);
              pos += rb.back();
            })
  const double to = timeout_of(opts.timeout, timeout_s_);
  auto outs = outputs;
  return enqueue(c10d::OpType::ALLTOALL, "all_to_all", outs, [send, outs, sb, so, rb, ro, to](Communicator& c) mutable {
    size_t total = rb.empty() ? 0 : ro.back() + rb.back();
    at::Tensor recv = at::empty({static_cast<int64_t>(total)}, at::kByte);
    alltoallv_bytes(c, static_cast<const char*>(send.data_ptr()), sb.data(), so.data(),
                    static_cast<char*>(recv.data_ptr()), rb.data(), ro.data(), to);
    for (size_t q = 0; q < outs.size(); ++q) copy_bytes_into(outs[q], static_cast<const char*>(recv.data_ptr()) + ro[q]);
  });
}

}  // namespace dtrain::py
