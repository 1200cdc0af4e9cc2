// autograd/op_util.h — small helpers shared by the op implementations (not a public API).
//
// graph_of() checks that all Vars of one op belong to one Graph and returns it.
// write_grad() hands a backward function the gradient buffer of an input together with
// "accumulate" (add into it) or not (overwrite it), and does nothing when that input needs
// no gradient.
#pragma once

#include <initializer_list>

#include "autograd/graph.h"
#include "base/error.h"

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

}  // namespace dtrain::detail
