// parallel/tensor_parallel.cc — the conjugate ops f and g, and GPT sharding.
//
// Each op records one graph node whose backward function runs the conjugate collective.
// Collectives inside backward functions are safe because every rank of the group walks the
// same tape in the same order, so the k ranks issue the same collectives in the same order.
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
  if (instrument_) instrument_->blocking(name, t0, now_seconds(), bytes, "\"bytes\":" + std::to_string(bytes));
}

void TpGroup::allreduce(float* data, int64_t n, bool backward) {
  if (size() == 1) return;
  (backward ? counts_.allreduce_bwd : counts_.allreduce_fwd)++;
  const double t0 = now_seconds();
  dtrain::allreduce(*comm_, data, static_cast<size_t>(n), DType::kFloat32, ReduceOp::kSum);
  record(backward ? "tp.allreduce.bwd" : "tp.allreduce.fwd", t0, n * 4);
}

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
