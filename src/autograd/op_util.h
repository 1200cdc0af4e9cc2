// autograd/op_util.h — small helpers shared by the op implementations (not a public API).
//
// graph_of() checks that all Vars of one op belong to one Graph and returns it.
// write_grad() hands a backward function the gradient buffer of an input together with
// "accumulate" (add into it) or not (overwrite it), and does nothing when that input needs
// no gradient. parallel_rows() splits row-wise work over a pool.
#pragma once

#include <algorithm>
#include <initializer_list>

#include "autograd/graph.h"
#include "base/error.h"
#include "base/thread_pool.h"

namespace dtrain::detail {

inline Graph& graph_of(std::initializer_list<const Var*> vars, const char* op) {
  Graph* g = nullptr;
  for (const Var* v : vars) {
    if (!v->defined()) continue;
    if (g == nullptr) g = v->graph();
    DT_CHECK(v->graph() == g, InvalidArgument, op << ": inputs belong to different graphs");
  }
  DT_CHECK(g != nullptr, InvalidArgument, op << ": no defined input");
  return *g;
}

// fn(Tensor& sink, bool accumulate)
template <class F>
inline void write_grad(Graph& g, int id, F&& fn) {
  if (id < 0 || !g.requires_grad(id)) return;
  bool acc = false;
  Tensor sink = g.grad_sink(id, &acc);
  fn(sink, acc);
}

// fn(lo, hi) over row ranges of a (rows, cols) problem, split over the pool when there is
// enough work (>= 64K elements); the split depends only on the sizes.
template <class F>
inline void parallel_rows(ThreadPool* pool, int64_t rows, int64_t cols, F&& fn) {
  if (pool == nullptr || pool->size() == 1 || rows * cols < (1 << 16) || rows < 2) {
    fn(int64_t{0}, rows);
    return;
  }
  int64_t grain = std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(cols, 1));
  pool->parallel_for(0, rows, grain, [&](int64_t lo, int64_t hi) { fn(lo, hi); });
}

}  // namespace dtrain::detail
