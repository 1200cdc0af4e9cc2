// parallel/tensor_parallel.cc — the conjugate ops, parallel linear layers and GPT sharding.
//
// Each op records one graph node whose backward function runs the conjugate collective.
// Collectives inside backward functions are safe because every rank of the group walks the
// same tape in the same order, so the k ranks issue the same collectives in the same order.
// Column blocks: an all-gather delivers k contiguous (rows, c) blocks rank by rank; the ops
// interleave them into (rows, k c) rows (and pick a block out of such rows) with strided copies.
#include "parallel/tensor_parallel.h"

#include <algorithm>
#include <map>
#include <vector>

#include "autograd/op_util.h"
#include "base/clock.h"
#include "base/error.h"
#include "coll/collectives.h"

namespace dtrain {

void TpGroup::record(const char* name, double t0, int64_t bytes) {
  counts_.bytes += bytes;
  if (instrument_) instrument_->comm(0, name, t0, now_seconds(), bytes);
}

void TpGroup::allreduce(float* data, int64_t n, bool backward) {
  if (size() == 1) return;
  (backward ? counts_.allreduce_bwd : counts_.allreduce_fwd)++;
  const double t0 = now_seconds();
  dtrain::allreduce(*comm_, data, static_cast<size_t>(n), DType::kFloat32, ReduceOp::kSum);
  record(backward ? "tp.allreduce.bwd" : "tp.allreduce.fwd", t0, n * 4);
}

void TpGroup::allgather(const float* send, float* recv, int64_t n, bool backward) {
  if (size() == 1) {
    std::copy_n(send, n, recv);
    return;
  }
  (backward ? counts_.allgather_bwd : counts_.allgather_fwd)++;
  const double t0 = now_seconds();
  dtrain::allgather(*comm_, send, recv, static_cast<size_t>(n), DType::kFloat32);
  record(backward ? "tp.allgather.bwd" : "tp.allgather.fwd", t0, n * 4);
}

void TpGroup::reduce_scatter(const float* send, float* recv, int64_t n, bool backward) {
  if (size() == 1) {
    std::copy_n(send, n, recv);
    return;
  }
  (backward ? counts_.reduce_scatter_bwd : counts_.reduce_scatter_fwd)++;
  const double t0 = now_seconds();
  dtrain::reduce_scatter(*comm_, send, recv, static_cast<size_t>(n), DType::kFloat32, ReduceOp::kSum);
  record(backward ? "tp.reduce_scatter.bwd" : "tp.reduce_scatter.fwd", t0, n * size() * 4);
}

namespace {

int64_t rows_of(const Tensor& t) { return t.numel() / std::max<int64_t>(t.dim(-1), 1); }

// (rows, k c) -> block r: (rows, c)
Tensor column_block(const Tensor& full, int r, int k) {
  Tensor f = full.contiguous();
  const int64_t rows = rows_of(f), c = f.dim(-1) / k;
  Tensor out = Tensor::empty({rows, c});
  for (int64_t i = 0; i < rows; ++i) std::copy_n(f.data() + i * k * c + r * c, c, out.data() + i * c);
  return out;
}

// k blocks of (rows, c), stored block after block -> (rows, k c)
Tensor interleave_blocks(const std::vector<float>& blocks, int64_t rows, int64_t c, int k) {
  Tensor out = Tensor::empty({rows, k * c});
  for (int r = 0; r < k; ++r)
    for (int64_t i = 0; i < rows; ++i) std::copy_n(blocks.data() + (r * rows + i) * c, c, out.data() + i * k * c + r * c);
  return out;
}

// All-gather of column blocks: (rows, c) on each rank -> (rows, k c).
Tensor gather_columns(TpGroup& tp, const Tensor& part, bool backward) {
  Tensor p = part.contiguous();
  const int64_t rows = rows_of(p), c = p.dim(-1);
  std::vector<float> all(static_cast<size_t>(rows * c * tp.size()));
  tp.allgather(p.data(), all.data(), rows * c, backward);
  return interleave_blocks(all, rows, c, tp.size());
}

void check_divides(int64_t n, int k, const char* op, const Shape& s) {
  DT_CHECK(n % k == 0, InvalidArgument, op << ": dimension " << n << " of " << shape_str(s) << " is not divisible by the "
                                            << k << " tensor-parallel ranks");
}

}  // namespace

Var copy_to_tp(TpGroup& tp, const Var& x) {
  if (tp.size() == 1) return x;
  Graph& g = detail::graph_of({&x}, "copy_to_tp");
  return g.make(x.value(), {x.id()}, [&tp](Graph& g, int self) {
    Tensor gy = g.grad(self).clone();
    tp.allreduce(gy.data(), gy.numel(), true);
    g.accumulate_grad(g.inputs(self)[0], gy);
  });
}

Var reduce_from_tp(TpGroup& tp, const Var& x) {
  if (tp.size() == 1) return x;
  Graph& g = detail::graph_of({&x}, "reduce_from_tp");
  Tensor y = x.value().clone();
  tp.allreduce(y.data(), y.numel(), false);
  return g.make(y, {x.id()}, [](Graph& g, int self) { g.accumulate_grad(g.inputs(self)[0], g.grad(self)); });
}

Var scatter_to_tp(TpGroup& tp, const Var& x) {
  if (tp.size() == 1) return x;
  Graph& g = detail::graph_of({&x}, "scatter_to_tp");
  check_divides(x.value().dim(-1), tp.size(), "scatter_to_tp", x.value().shape());
  Tensor y = column_block(x.value(), tp.rank(), tp.size());
  return g.make(y, {x.id()}, [&tp](Graph& g, int self) {
    int in = g.inputs(self)[0];
    g.accumulate_grad(in, gather_columns(tp, g.grad(self), true).reshape(g.value(in).shape()));
  });
}

Var gather_from_tp(TpGroup& tp, const Var& x) {
  if (tp.size() == 1) return x;
  Graph& g = detail::graph_of({&x}, "gather_from_tp");
  Tensor y = gather_columns(tp, x.value(), false);
  return g.make(y, {x.id()}, [&tp](Graph& g, int self) {
    int in = g.inputs(self)[0];
    g.accumulate_grad(in, column_block(g.grad(self), tp.rank(), tp.size()).reshape(g.value(in).shape()));
  });
}

Var gather_rows_tp(TpGroup& tp, const Var& x) {
  if (tp.size() == 1) return x;
  Graph& g = detail::graph_of({&x}, "gather_rows_tp");
  Tensor p = x.value().contiguous();
  Shape s = p.shape();
  s[0] *= tp.size();
  Tensor y = Tensor::empty(s);
  tp.allgather(p.data(), y.data(), p.numel(), false);
  return g.make(y, {x.id()}, [&tp](Graph& g, int self) {
    int in = g.inputs(self)[0];
    Tensor gy = g.grad(self).contiguous();
    Tensor gx = Tensor::empty(g.value(in).shape());
    tp.reduce_scatter(gy.data(), gx.data(), gx.numel(), true);
    g.accumulate_grad(in, gx);
  });
}

Var scatter_rows_tp(TpGroup& tp, const Var& x) {
  if (tp.size() == 1) return x;
  Graph& g = detail::graph_of({&x}, "scatter_rows_tp");
  Tensor p = x.value().contiguous();
  check_divides(p.dim(0), tp.size(), "scatter_rows_tp", p.shape());
  Shape s = p.shape();
  s[0] /= tp.size();
  Tensor y = Tensor::empty(s);
  tp.reduce_scatter(p.data(), y.data(), y.numel(), false);
  return g.make(y, {x.id()}, [&tp](Graph& g, int self) {
    int in = g.inputs(self)[0];
    Tensor gy = g.grad(self).contiguous();
    Tensor gx = Tensor::empty(g.value(in).shape());
    tp.allgather(gy.data(), gx.data(), gy.numel(), true);
    g.accumulate_grad(in, gx);
  });
}

// ---- layers ----

ColumnParallelLinear::ColumnParallelLinear(TpGroup& tp, int64_t in, int64_t out, bool gather_output, Activation act)
    : tp_(tp),
      in_(in),
      out_(out),
      gather_(gather_output),
      act_(act),
      w_(add_param("weight", {out / tp.size(), in}, Init{InitKind::kUniformFanIn, in, out, 1.0f})),
      b_(add_param("bias", {out / tp.size()}, Init{InitKind::kUniformFanIn, in, out, 1.0f})) {
  DT_CHECK(out % tp.size() == 0, InvalidArgument,
           "ColumnParallelLinear(" << in << "->" << out << "): " << tp.size() << " ranks must divide the outputs");
}

Var ColumnParallelLinear::forward(Graph& g, const Var& x) {
  Var y = linear(copy_to_tp(tp_, x), param_var(g, w_), param_var(g, b_), act_);  // (B, out/k)
  return gather_ ? gather_from_tp(tp_, y) : y;
}

void ColumnParallelLinear::load_from_dense(const Linear& dense) {
  auto& d = const_cast<Linear&>(dense);
  DT_CHECK(dense.in_features() == in_ && dense.out_features() == out_ && d.bias(), InvalidArgument,
           "ColumnParallelLinear::load_from_dense: shapes differ");
  w_.value.copy_from(tp_slice(d.weight().value, TpSplit::kRows, tp_.rank(), tp_.size()));
  b_.value.copy_from(tp_slice(d.bias()->value, TpSplit::kRows, tp_.rank(), tp_.size()));
}

RowParallelLinear::RowParallelLinear(TpGroup& tp, int64_t in, int64_t out, bool input_is_parallel)
    : tp_(tp),
      in_(in),
      out_(out),
      input_parallel_(input_is_parallel),
      w_(add_param("weight", {out, in / tp.size()}, Init{InitKind::kUniformFanIn, in, out, 1.0f})),
      b_(add_param("bias", {out}, Init{InitKind::kUniformFanIn, in, out, 1.0f})) {
  DT_CHECK(in % tp.size() == 0, InvalidArgument,
           "RowParallelLinear(" << in << "->" << out << "): " << tp.size() << " ranks must divide the inputs");
}

Var RowParallelLinear::forward(Graph& g, const Var& x) {
  Var xl = input_parallel_ ? x : scatter_to_tp(tp_, x);                          // (B, in/k)
  Var partial = linear(xl, param_var(g, w_), Var());                             // (B, out), partial sums
  return bias_add(reduce_from_tp(tp_, partial), param_var(g, b_));
}

void RowParallelLinear::load_from_dense(const Linear& dense) {
  auto& d = const_cast<Linear&>(dense);
  DT_CHECK(dense.in_features() == in_ && dense.out_features() == out_ && d.bias(), InvalidArgument,
           "RowParallelLinear::load_from_dense: shapes differ");
  w_.value.copy_from(tp_slice(d.weight().value, TpSplit::kCols, tp_.rank(), tp_.size()));
  b_.value.copy_from(d.bias()->value);
}

ParallelMlp::ParallelMlp(TpGroup& tp, int64_t in, int64_t hidden, int64_t out, Activation act)
    : fc1_(tp, in, hidden, false, act), fc2_(tp, hidden, out, true) {
  add_child("fc1", &fc1_);
  add_child("fc2", &fc2_);
}

Var ParallelMlp::forward(Graph& g, const Var& x) { return fc2_.forward(g, fc1_.forward(g, x)); }

void ParallelMlp::load_from_dense(const Linear& first, const Linear& second) {
  fc1_.load_from_dense(first);
  fc2_.load_from_dense(second);
}

// ---- slicing dense parameters ----

Tensor tp_slice(const Tensor& full, TpSplit split, int r, int k) {
  switch (split) {
    case TpSplit::kReplicated: return full.clone();
    case TpSplit::kRows: {
      const int64_t n = full.dim(0) / k;
      return full.slice(0, r * n, (r + 1) * n).contiguous();
    }
    case TpSplit::kRows3: {
      const int64_t w = full.dim(0) / 3, n = w / k;
      Shape s = full.shape();
      s[0] = 3 * n;
      Tensor out = Tensor::empty(s);
      for (int j = 0; j < 3; ++j) out.slice(0, j * n, (j + 1) * n).copy_from(full.slice(0, j * w + r * n, j * w + (r + 1) * n));
      return out;
    }
    case TpSplit::kCols: {
      const int64_t n = full.dim(1) / k;
      return full.slice(1, r * n, (r + 1) * n).contiguous();
    }
  }
  return {};
}

void tp_place(Tensor& full, const Tensor& part, TpSplit split, int r, int k) {
  switch (split) {
    case TpSplit::kReplicated: full.copy_from(part); return;
    case TpSplit::kRows: {
      const int64_t n = full.dim(0) / k;
      Tensor dst = full.slice(0, r * n, (r + 1) * n);
      dst.copy_from(part);
      return;
    }
    case TpSplit::kRows3: {
      const int64_t w = full.dim(0) / 3, n = w / k;
      for (int j = 0; j < 3; ++j) {
        Tensor dst = full.slice(0, j * w + r * n, j * w + (r + 1) * n);
        dst.copy_from(part.slice(0, j * n, (j + 1) * n));
      }
      return;
    }
    case TpSplit::kCols: {
      const int64_t n = full.dim(1) / k;
      Tensor dst = full.slice(1, r * n, (r + 1) * n);
      dst.copy_from(part);
      return;
    }
  }
}

namespace {
std::map<std::string, Parameter*> by_name(const GptStage& m) {
  std::map<std::string, Parameter*> out;
  for (Parameter* p : const_cast<GptStage&>(m).parameters()) out[p->name] = p;
  return out;
}
}  // namespace

void shard_gpt_from_dense(const GptStage& dense, GptStage& shard, int rank) {
  DT_CHECK(dense.tp_size() == 1, InvalidArgument, "shard_gpt_from_dense: the source must be dense");
  auto src = by_name(dense);
  for (Parameter* p : shard.parameters()) {
    auto it = src.find(p->name);
    DT_CHECK(it != src.end(), InvalidArgument, "shard_gpt_from_dense: the dense model has no " << p->name);
    p->value.copy_from(tp_slice(it->second->value, tp_split(p->name), rank, shard.tp_size()));
  }
}

void place_gpt_shard(GptStage& dense, const GptStage& shard, int rank, bool grads, bool with_replicated) {
  auto dst = by_name(dense);
  for (Parameter* p : const_cast<GptStage&>(shard).parameters()) {
    if (!with_replicated && tp_split(p->name) == TpSplit::kReplicated) continue;
    auto it = dst.find(p->name);
    DT_CHECK(it != dst.end(), InvalidArgument, "place_gpt_shard: the dense model has no " << p->name);
    Tensor& full = grads ? it->second->grad : it->second->value;
    tp_place(full, grads ? p->grad : p->value, tp_split(p->name), rank, shard.tp_size());
  }
}

}  // namespace dtrain
