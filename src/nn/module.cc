// nn/module.cc — parameter registration, flat-buffer layout, binding and init.
//
// Layout: parameters() walks the tree depth first (own parameters in declaration order,
// then children in registration order) and gives each parameter the next [offset,
// offset + numel) range, with no padding: num_params() is the plain sum of the parameter
// sizes (PyTorch's count) and the size of both flat buffers.
#include "nn/module.h"

#include <algorithm>
#include <sstream>

#include "base/error.h"
#include "tensor/random.h"

namespace dtrain {

Parameter& Module::add_param(const std::string& name, const Shape& shape, Init init) {
  auto p = std::make_unique<Parameter>();
  p->name = name;
  p->local_name = name;
  p->shape = shape;
  p->init = init;
  p->numel = shape_numel(shape);
  params_.push_back(std::move(p));
  return *params_.back();
}

void Module::add_child(const std::string& name, Module* child) {
  DT_CHECK(child != nullptr && child != this, InvalidArgument, "add_child('" << name << "'): bad child");
  children_.emplace_back(name, child);
}

void Module::collect(const std::string& prefix, std::vector<Parameter*>& out) {
  for (auto& p : params_) {
    std::string full = prefix + p->local_name;
    if (p->name != full) p->name = std::move(full);  // no write once set: readers may share the module
    out.push_back(p.get());
  }
  for (auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

std::vector<Parameter*> Module::parameters() {
  std::vector<Parameter*> out;
  collect("", out);
  return out;
}

void Module::collect_const(std::vector<const Parameter*>& out) const {
  for (const auto& p : params_) out.push_back(p.get());
  for (const auto& [name, child] : children_) child->collect_const(out);
}

std::vector<const Parameter*> Module::parameters() const {
  std::vector<const Parameter*> out;
  collect_const(out);
  return out;
}

int64_t Module::num_params() const {
  int64_t n = 0;
  for (const Parameter* p : parameters()) n += p->numel;
  return n;
}

// Assigns offsets and points every parameter (including children's) at its slice of the
// current flat buffers.
void Module::layout_and_view() {
  int64_t off = 0;
  float* pv = flat_params_.data();
  float* pg = flat_grads_.defined() ? flat_grads_.data() : nullptr;
  for (Parameter* p : parameters()) {
    p->offset = off;
    p->value = Tensor::wrap(pv + off, p->shape);
    p->grad = pg ? Tensor::wrap(pg + off, p->shape) : Tensor();
    off += p->numel;
  }
}

void Module::allocate(uint64_t seed, bool gradients) {
  int64_t n = num_params();
  flat_params_ = Tensor::zeros({n});
  flat_grads_ = gradients ? Tensor::zeros({n}) : Tensor();
  layout_and_view();
  init(seed);
}

void Module::bind(Tensor flat_params, Tensor flat_grads) {
  // Rebinding to the buffers already bound (a replica per minibatch) costs nothing.
  if (bound() && flat_params.defined() && flat_grads.defined() && flat_params.data() == flat_params_.data() &&
      flat_grads.data() == flat_grads_.data() && flat_params.numel() == flat_params_.numel() &&
      flat_grads.numel() == flat_grads_.numel())
    return;
  int64_t n = num_params();
  DT_CHECK(flat_params.defined() && flat_grads.defined(), InvalidArgument, "bind: undefined buffer");
  DT_CHECK(flat_params.numel() == n && flat_grads.numel() == n, InvalidArgument,
           "bind: the model has " << n << " parameters but the buffers hold " << flat_params.numel()
                                  << " (params) and " << flat_grads.numel() << " (grads) floats");
  DT_CHECK(flat_params.is_contiguous() && flat_grads.is_contiguous(), InvalidArgument,
           "bind: flat buffers must be contiguous");
  flat_params_ = flat_params.reshape({n});
  flat_grads_ = flat_grads.reshape({n});
  layout_and_view();
}

void Module::bind(std::span<float> flat_params, std::span<float> flat_grads) {
  bind(Tensor::wrap(flat_params.data(), {static_cast<int64_t>(flat_params.size())}),
       Tensor::wrap(flat_grads.data(), {static_cast<int64_t>(flat_grads.size())}));
}

void Module::bind_readonly(std::span<const float> flat_params, std::span<float> flat_grads) {
  bind(std::span<float>(const_cast<float*>(flat_params.data()), flat_params.size()), flat_grads);
}

// Parameter i draws from the stream derive_seed(seed, i): independent of the others.
void Module::init(uint64_t seed) {
  DT_CHECK(bound(), InvalidArgument, "init: the module has no parameter buffer (call allocate or bind)");
  flat_params_.fill(0.0f);
  std::vector<Parameter*> ps = parameters();
  for (size_t i = 0; i < ps.size(); ++i) init_fill(ps[i]->init, ps[i]->value.span(), derive_seed(seed, i));
}

void Module::zero_grad() {
  if (flat_grads_.defined()) flat_grads_.fill(0.0f);
}

void Module::set_training(bool training) {
  training_ = training;
  for (auto& [name, child] : children_) child->set_training(training);
}

Var Module::param_var(Graph& graph, const Parameter& p) const {
  DT_CHECK(p.value.defined(), InvalidArgument,
           "parameter '" << p.name << "' has no storage: call allocate() or bind() on the model first");
  if (!p.grad.defined()) {
    // Built for inference (allocate(seed, false)): a constant on a graph that does not record.
    DT_CHECK(!graph.recording(), InvalidArgument,
             "parameter '" << p.name << "' has no gradient buffer (the model was allocated for inference only): "
                           << "bind() a gradient buffer before training it");
    return graph.input(p.value);
  }
  return graph.param(p.value, p.grad);
}

std::string Module::describe() const {
  std::ostringstream os;
  for (const Parameter* p : parameters())
    os << p->name << " " << shape_str(p->shape) << " offset " << p->offset << " numel " << p->numel << "\n";
  os << "total " << num_params() << " parameters\n";
  return os.str();
}

}  // namespace dtrain
