// autograd/graph.cc — the tape: node bookkeeping, gradient sinks, the backward walk.
//
// Backward walk: nodes are stored in creation order, which is topological (every input of a
// node has a smaller id). Seeding the root's gradient and visiting ids from the root down to
// 0 therefore sees every node after all of its consumers have contributed, so each recorded
// backward function runs exactly once with its complete output gradient. Nodes that received
// no gradient are skipped. At the end, overwrite-mode parameters that received nothing are
// zeroed, so their gradient buffers always hold "this pass's gradient".
#include "autograd/graph.h"

#include <algorithm>

#include "base/error.h"
#include "tensor/kernels.h"
#include "tensor/ops.h"

namespace dtrain {

const Tensor& Var::value() const {
  DT_CHECK(graph_ != nullptr, InvalidArgument, "use of an undefined Var");
  return graph_->value(id_);
}
Tensor Var::grad() const {
  DT_CHECK(graph_ != nullptr, InvalidArgument, "use of an undefined Var");
  return graph_->grad(id_);
}
bool Var::requires_grad() const { return graph_ != nullptr && graph_->requires_grad(id_); }

Graph::Graph(ThreadPool* pool, bool record) : pool_(pool), record_(record) { nodes_.reserve(64); }

Var Graph::input(Tensor value) {
  DT_CHECK(value.defined(), InvalidArgument, "Graph::input of an undefined tensor");
  Node n;
  n.value = std::move(value);
  nodes_.push_back(std::move(n));
  return Var(this, static_cast<int>(nodes_.size()) - 1);
}

Var Graph::leaf(Tensor value, bool requires_grad) {
  Var v = input(std::move(value));
  nodes_.back().requires_grad = requires_grad && record_;
  return v;
}

Var Graph::param(Tensor value, Tensor grad, GradMode mode) {
  DT_CHECK(value.defined() && grad.defined(), InvalidArgument, "Graph::param needs a value and a gradient view");
  DT_CHECK(value.shape() == grad.shape(), InvalidArgument,
           "Graph::param: value " << shape_str(value.shape()) << " vs gradient " << shape_str(grad.shape()));
  DT_CHECK(grad.is_contiguous(), InvalidArgument, "Graph::param: gradient view must be contiguous");
  auto it = param_by_grad_.find(grad.data());
  if (it != param_by_grad_.end()) return Var(this, it->second);
  Var v = input(std::move(value));
  Node& n = nodes_.back();
  n.requires_grad = record_;
  n.is_param = true;
  n.param_accumulate = mode == GradMode::kAccumulate;
  n.grad = std::move(grad);
  param_by_grad_[n.grad.data()] = v.id();
  return v;
}

Var Graph::make(Tensor value, std::vector<int> inputs, BackwardFn backward) {
  bool needs = false;
  for (int id : inputs) {
    DT_CHECK(id >= 0 && id < static_cast<int>(nodes_.size()), InvalidArgument,
             "op input belongs to another graph or was cleared");
    needs = needs || nodes_[id].requires_grad;
  }
  Node n;
  n.value = std::move(value);
  if (record_ && needs) {
    n.requires_grad = true;
    n.inputs = std::move(inputs);
    n.backward = std::move(backward);
  }
  nodes_.push_back(std::move(n));
  return Var(this, static_cast<int>(nodes_.size()) - 1);
}

Tensor Graph::grad_sink(int id, bool* accumulate) {
  Node& n = nodes_[id];
  if (n.got_grad) {
    *accumulate = true;
  } else {
    *accumulate = n.is_param && n.param_accumulate;
    n.got_grad = true;
    if (!n.grad.defined()) n.grad = Tensor::empty(n.value.shape());
  }
  return n.grad;
}

void Graph::accumulate_grad(int id, const Tensor& g) {
  DT_CHECK(g.shape() == nodes_[id].value.shape(), InvalidArgument,
           "gradient " << shape_str(g.shape()) << " for a value of shape " << shape_str(nodes_[id].value.shape()));
  bool acc = false;
  Tensor sink = grad_sink(id, &acc);
  Tensor src = g.contiguous();
  if (acc) {
    kernels().add(sink.data(), src.data(), sink.data(), sink.numel());
  } else if (sink.data() != src.data()) {
    std::copy_n(src.data(), src.numel(), sink.data());
  }
}

void Graph::backward(const Var& loss) {
  DT_CHECK(loss.graph() == this, InvalidArgument, "backward: the loss belongs to another graph");
  DT_CHECK(value(loss.id()).numel() == 1, InvalidArgument,
           "backward(loss) needs a one-element loss, got shape " << shape_str(value(loss.id()).shape())
                                                                << "; pass a seed gradient instead");
  backward(loss, Tensor::full(value(loss.id()).shape(), 1.0f));
}

void Graph::backward(const Var& out, const Tensor& seed) {
  DT_CHECK(record_, InvalidArgument, "backward on a graph built with record = false");
  DT_CHECK(out.graph() == this, InvalidArgument, "backward: the output belongs to another graph");
  for (Node& n : nodes_) n.got_grad = false;
  for (Node& n : nodes_)
    if (!n.is_param) n.grad = Tensor();
  if (!nodes_[out.id()].requires_grad) {
    run_backward(-1);
    return;
  }
  accumulate_grad(out.id(), seed);
  run_backward(out.id());
}

void Graph::run_backward(int root) {
  for (int id = root; id >= 0; --id) {
    Node& n = nodes_[id];
    if (!n.got_grad || !n.backward) continue;
    // Backward functions never add nodes, so the reference stays valid.
    n.backward(*this, id);
  }
  for (Node& n : nodes_) {
    if (n.is_param && !n.got_grad && !n.param_accumulate) n.grad.fill(0.0f);
  }
}

void Graph::clear() {
  nodes_.clear();
  param_by_grad_.clear();
}

}  // namespace dtrain
