// autograd/graph.h — reverse-mode automatic differentiation on a tape.
//
// Contract
// - A Graph records every op applied to its Vars, in creation order (which is a topological
//   order: an op's inputs always exist before its output). backward(loss) walks the tape from
//   the loss back to the first node once, calling each recorded backward function whose
//   output received a gradient. A Graph is built for one forward/backward pass; make a new
//   one (cheap) or call clear() for the next step.
// - A Var is a small handle (graph pointer + node id). value() is the forward result;
//   grad() is d loss / d var after backward (undefined if no gradient reached it).
// - Leaves:
//     input(t)            a constant (no gradient), e.g. a batch of features;
//     leaf(t)             a variable whose gradient lives in a Graph-owned buffer;
//     param(value, grad)  a model parameter whose gradient is written into the caller's
//                         `grad` view (a slice of the model's flat gradient buffer), so no
//                         copy is needed after backward. Mode kOverwrite (default) means
//                         after backward `grad` holds exactly this pass's gradient (zeros if
//                         the parameter was unused); kAccumulate adds to what is there
//                         (gradient accumulation over micro-batches). Calling param() twice
//                         with the same grad buffer returns the same Var (shared weights).
// - Gradient flow inside backward: the first contribution to a node writes its gradient
//   buffer (beta = 0); later ones add. Backward functions ask for this with grad_sink().
// - Inference: Graph(pool, /*record=*/false) records no backward functions (less memory);
//   backward() on it throws.
// - The ThreadPool (optional) is used by the ops for element-wise work. BLAS threading is
//   separate (tensor/blas.h).
// Thread-safety: a Graph belongs to one thread. Different Graphs may run concurrently (e.g.
// one per thread replica), also over the same parameter values.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "tensor/tensor.h"

namespace dtrain {

class Graph;
class ThreadPool;

class Var {
 public:
  Var() = default;
  Var(Graph* graph, int id) : graph_(graph), id_(id) {}

  bool defined() const { return graph_ != nullptr; }
  Graph* graph() const { return graph_; }
  int id() const { return id_; }
  const Tensor& value() const;
  const Shape& shape() const { return value().shape(); }
  int64_t dim(int i) const { return value().dim(i); }
  // The gradient after backward; undefined Tensor if none reached this Var.
  Tensor grad() const;
  bool requires_grad() const;
  // value().item(): the loss as a float.
  float item() const { return value().item(); }

 private:
  Graph* graph_ = nullptr;
  int id_ = -1;
};

enum class GradMode { kOverwrite, kAccumulate };

class Graph {
 public:
  // Called during backward with the graph and the id of the node being differentiated.
  using BackwardFn = std::function<void(Graph&, int self)>;

  explicit Graph(ThreadPool* pool = nullptr, bool record = true);
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  ThreadPool* pool() const { return pool_; }
  bool recording() const { return record_; }

  Var input(Tensor value);
  Var leaf(Tensor value, bool requires_grad = true);
  Var param(Tensor value, Tensor grad, GradMode mode = GradMode::kOverwrite);

  // Seeds d loss/d loss = 1 (loss must have one element) and runs the backward pass.
  void backward(const Var& loss);
  // Seeds with an explicit output gradient of the same shape as out.
  void backward(const Var& out, const Tensor& seed);
  // Drops all nodes; Vars of this graph become invalid.
  void clear();
  int64_t num_nodes() const { return static_cast<int64_t>(nodes_.size()); }

  // ---- For op implementations (autograd/ops*.cc) ----
  // Records an op output. When no input requires a gradient (or the graph does not record)
  // the backward function is dropped and the output is a constant.
  Var make(Tensor value, std::vector<int> inputs, BackwardFn backward);
  const Tensor& value(int id) const { return nodes_[id].value; }
  const Tensor& grad(int id) const { return nodes_[id].grad; }
  bool requires_grad(int id) const { return nodes_[id].requires_grad; }
  const std::vector<int>& inputs(int id) const { return nodes_[id].inputs; }
  // Where a backward function writes node `id`'s gradient. *accumulate is false for the first
  // contribution in this pass (overwrite the buffer: gemm beta 0) and true afterwards (add:
  // beta 1). The buffer is contiguous with the node value's shape.
  Tensor grad_sink(int id, bool* accumulate);
  // Adds `g` (same shape) to node id's gradient, honoring overwrite/accumulate.
  void accumulate_grad(int id, const Tensor& g);

 private:
  struct Node {
    Tensor value;
    Tensor grad;
    std::vector<int> inputs;
    BackwardFn backward;
    bool requires_grad = false;
    bool is_param = false;       // grad is an external view
    bool param_accumulate = false;
    bool got_grad = false;       // received a contribution in the current pass
  };
  void run_backward(int root);

  ThreadPool* pool_;
  bool record_;
  std::vector<Node> nodes_;
  std::unordered_map<const float*, int> param_by_grad_;
};

}  // namespace dtrain
