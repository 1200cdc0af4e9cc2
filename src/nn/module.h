// nn/module.h — Module: a forward function plus parameters that live in flat buffers.
//
// Contract
// - A module declares its parameters (name, shape, init rule) and child modules in its
//   constructor. The root module lays every parameter of the tree out, in declaration order
//   (depth first), in ONE contiguous float buffer, and every gradient in a second buffer with
//   the same layout. parameters() lists them with their offsets, so gradient buckets, ZeRO
//   shards and parameter-server key ranges are plain [offset, offset + numel) slices.
// - Storage: allocate(seed) gives the module its own zeroed gradient buffer and a parameter
//   buffer filled by init(seed); allocate(seed, false) the parameters only, for a module
//   that only infers (its graphs must not record: a recording forward throws naming the
//   parameter, grad_span() is empty). bind(params, grads) points the module at EXTERNAL buffers
//   instead (the caller keeps them alive; sizes must equal num_params()). Thread replicas
//   bind the same parameter buffer and each its own gradient buffer. Rebinding is allowed at
//   any time between passes.
// - init(seed) is deterministic: parameter i draws from a stream derived from (seed, i), so
//   the values do not depend on thread count or on the other parameters.
// - forward(graph, x) builds this pass's ops on `graph`; the graph writes parameter
//   gradients straight into the bound gradient buffer (overwrite mode: after backward the
//   buffer holds this pass's gradient; see Graph::param).
// - Children register with add_child(); a child must outlive nothing but its parent (members
//   or unique_ptrs of the parent). Only the root's allocate/bind should be called.
// Thread-safety: forward() reads module state and the parameter buffer; the backward pass
// of its Graph writes the bound gradient buffer. So threads may share one module for
// inference (each with its own Graph), while training threads use one module object
// (replica) each, bound to a shared parameter buffer and their own gradient buffer.
// allocate/bind/init/set_training are not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "autograd/graph.h"
#include "nn/init.h"

namespace dtrain {

struct Parameter {
  std::string name;        // dotted path from the root, e.g. "layers.0.weight" (set by parameters())
  std::string local_name;  // as registered, e.g. "weight"
  Shape shape;
  Init init;
  int64_t offset = 0;  // into the flat buffers, valid after layout
  int64_t numel = 0;
  Tensor value;  // view into the flat parameter buffer
  Tensor grad;   // view into the flat gradient buffer
};

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // (B, in...) -> (B, out...). Subclasses implement this.
  virtual Var forward(Graph& graph, const Var& x) = 0;
  // Convenience: forward on a constant input tensor.
  Var forward(Graph& graph, const Tensor& x) { return forward(graph, graph.input(x)); }

  // All parameters of the tree, in layout order.
  std::vector<Parameter*> parameters();
  std::vector<const Parameter*> parameters() const;
  int64_t num_params() const;

  void allocate(uint64_t seed, bool gradients = true);
  void bind(Tensor flat_params, Tensor flat_grads);
  // Convenience for raw buffers (e.g. a std::vector<float> per replica).
  void bind(std::span<float> flat_params, std::span<float> flat_grads);
  // Read-only parameters (a replica evaluating at someone else's weights): forward/backward
  // never write the parameter buffer; only init() would, so do not call it after this.
  void bind_readonly(std::span<const float> flat_params, std::span<float> flat_grads);
  bool bound() const { return flat_params_.defined(); }
  void init(uint64_t seed);
  void zero_grad();

  // The flat buffers (1-D tensors of num_params() elements).
  Tensor& flat_params() { return flat_params_; }
  Tensor& flat_grads() { return flat_grads_; }
  const Tensor& flat_params() const { return flat_params_; }
  const Tensor& flat_grads() const { return flat_grads_; }
  std::span<float> param_span() { return flat_params_.span(); }
  std::span<float> grad_span() { return flat_grads_.defined() ? flat_grads_.span() : std::span<float>(); }

  // Training mode (dropout on) vs evaluation; propagates to children.
  void set_training(bool training);
  bool training() const { return training_; }

  // Multi-line summary: one line per parameter with name, shape, offset.
  std::string describe() const;

 protected:
  Parameter& add_param(const std::string& name, const Shape& shape, Init init);
  void add_child(const std::string& name, Module* child);
  // The Var for a parameter on this graph (value + its gradient view).
  Var param_var(Graph& graph, const Parameter& p) const;

 private:
  void collect(const std::string& prefix, std::vector<Parameter*>& out);
  // Read-only traversal for the const accessors: writes nothing (names were set when the
  // module was laid out), so const calls from several threads do not race.
  void collect_const(std::vector<const Parameter*>& out) const;
  void layout_and_view();

  std::vector<std::unique_ptr<Parameter>> params_;
  std::vector<std::pair<std::string, Module*>> children_;
  Tensor flat_params_, flat_grads_;
  bool training_ = true;
};

}  // namespace dtrain
