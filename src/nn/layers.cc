// nn/layers.cc — Linear, LayerNorm, Embedding.
#include "nn/layers.h"

#include <cmath>

#include "base/error.h"

namespace dtrain {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, Activation act)
    : in_(in_features), out_(out_features), act_(act) {
  DT_CHECK(in_features > 0 && out_features > 0, InvalidArgument,
           "Linear(" << in_features << "->" << out_features << "): sizes must be positive");
  Init w{InitKind::kUniformFanIn, in_features, out_features, 1.0f};
  weight_ = &add_param("weight", {out_features, in_features}, w);
  if (bias) bias_ = &add_param("bias", {out_features}, w);
}

Var Linear::forward(Graph& graph, const Var& x) {
  const Tensor& X = x.value();
  DT_CHECK(X.ndim() == 2 && X.dim(1) == in_, InvalidArgument,
           "Linear(" << in_ << "->" << out_ << "): input " << shape_str(X.shape()) << " needs shape [B, " << in_
                     << "] (weight " << shape_str(weight_->shape) << ")");
  Var w = param_var(graph, *weight_);
  Var b = bias_ ? param_var(graph, *bias_) : Var();
  return linear(x, w, b, act_);
}

LayerNorm::LayerNorm(int64_t features, float eps) : features_(features), eps_(eps) {
  DT_CHECK(features > 0, InvalidArgument, "LayerNorm(" << features << "): size must be positive");
  gamma_ = &add_param("weight", {features}, Init{InitKind::kOnes, features, features, 1.0f});
  beta_ = &add_param("bias", {features}, Init{InitKind::kZeros, features, features, 1.0f});
}

Var LayerNorm::forward(Graph& graph, const Var& x) {
  DT_CHECK(x.value().ndim() >= 1 && x.value().dim(-1) == features_, InvalidArgument,
           "LayerNorm(" << features_ << "): input " << shape_str(x.value().shape()) << " needs last dim " << features_);
  return layernorm(x, param_var(graph, *gamma_), param_var(graph, *beta_), eps_);
}

Embedding::Embedding(int64_t vocab, int64_t dim) : vocab_(vocab), dim_(dim) {
  DT_CHECK(vocab > 0 && dim > 0, InvalidArgument, "Embedding(" << vocab << ", " << dim << "): sizes must be positive");
  table_ = &add_param("weight", {vocab, dim}, Init{InitKind::kNormal, vocab, dim, 1.0f});
}

Var Embedding::lookup(Graph& graph, std::span<const int32_t> indices) {
  return embedding(param_var(graph, *table_), indices);
}

Var Embedding::forward(Graph& graph, const Var& x) {
  std::vector<float> v = x.value().to_vector();
  std::vector<int32_t> idx(v.size());
  for (size_t i = 0; i < v.size(); ++i) idx[i] = static_cast<int32_t>(std::lround(v[i]));
  return lookup(graph, idx);
}

}  // namespace dtrain
