// parallel/pipeline_mlp.cc — MLP pieces for the pipeline executor.
#include "parallel/pipeline_mlp.h"

#include "autograd/loss.h"
#include "base/error.h"

namespace dtrain {

// A piece: Linear layers [begin, end) of the MLP, ReLU after each but the model's last.
// Its parameters join the graph in accumulate mode: the executor sums the micro-batches'
// gradients into the piece's buffer (zero it before a step).
struct MlpPipeline::Piece : public Module {
  int begin = 0, end = 0;
  std::vector<std::unique_ptr<Linear>> layers;
  void add(const std::string& name, Linear* l) { add_child(name, l); }
  Var forward(Graph& g, const Var& x) override {
    Var h = x;
    for (auto& l : layers) {
      Var w = g.param(l->weight().value, l->weight().grad, GradMode::kAccumulate);
      Var b = g.param(l->bias()->value, l->bias()->grad, GradMode::kAccumulate);
      h = linear(h, w, b, l->activation());
    }
    return h;
  }
};

MlpPipeline::MlpPipeline(const std::string& spec, int stages, int chunks, int rank)
    : dims_(MLP::parse_spec(spec)), stages_(stages), chunks_(chunks), rank_(rank) {
  const int n = static_cast<int>(dims_.size()) - 1;
  std::vector<double> costs;
  for (int i = 0; i < n; ++i) costs.push_back(static_cast<double>(dims_[static_cast<size_t>(i)] * dims_[static_cast<size_t>(i + 1)]));
  bounds_ = balanced_partition(costs, stages * chunks);
  for (int c = 0; c < chunks; ++c) {
    const int p = c * stages + rank;
    auto piece = std::make_unique<Piece>();
    piece->begin = bounds_[static_cast<size_t>(p)];
    piece->end = bounds_[static_cast<size_t>(p + 1)];
    for (int i = piece->begin; i < piece->end; ++i) {
      const Activation act = i + 1 < n ? Activation::kRelu : Activation::kNone;
      piece->layers.push_back(std::make_unique<Linear>(dims_[static_cast<size_t>(i)], dims_[static_cast<size_t>(i + 1)], true, act));
      piece->add("layers." + std::to_string(i), piece->layers.back().get());
    }
    piece->allocate(0);
    piece->zero_grad();
    mine_.push_back(std::move(piece));
  }
}

MlpPipeline::~MlpPipeline() = default;

Linear* MlpPipeline::layer(int i) {
  for (auto& p : mine_)
    if (i >= p->begin && i < p->end) return p->layers[static_cast<size_t>(i - p->begin)].get();
  return nullptr;
}

void MlpPipeline::zero_grads() {
  for (auto& p : mine_) p->zero_grad();
}

void MlpPipeline::load_from(MLP& dense) {
  DT_CHECK(dense.dims() == dims_, InvalidArgument, "MlpPipeline::load_from: the dense MLP is " << dense.spec());
  for (auto& p : mine_)
    for (int i = p->begin; i < p->end; ++i) {
      Linear& dst = *p->layers[static_cast<size_t>(i - p->begin)];
      dst.weight().value.copy_from(dense.layer(i).weight().value);
      dst.bias()->value.copy_from(dense.layer(i).bias()->value);
    }
}

void MlpPipeline::set_batch(const Tensor& x, std::vector<int32_t> labels, int micro) {
  const int64_t b = x.dim(0);
  DT_CHECK(micro >= 1 && b % micro == 0 && static_cast<int64_t>(labels.size()) == b, InvalidArgument,
           "MlpPipeline: batch of " << b << " rows (" << labels.size() << " labels) does not split into " << micro
                                    << " equal micro-batches");
  rows_ = b / micro;
  xs_.clear();
  ys_.clear();
  for (int m = 0; m < micro; ++m) {
    xs_.push_back(x.slice(0, m * rows_, (m + 1) * rows_).contiguous());
    ys_.emplace_back(labels.begin() + m * rows_, labels.begin() + (m + 1) * rows_);
  }
}

Var MlpPipeline::forward(Graph& g, int chunk, int micro, const Var& input) {
  Piece& p = *mine_.at(static_cast<size_t>(chunk));
  Var x = input.defined() ? input : g.input(xs_.at(static_cast<size_t>(micro)));
  Var out = p.forward(g, x);
  const bool last = p.end == static_cast<int>(dims_.size()) - 1;
  return last ? cross_entropy(out, ys_.at(static_cast<size_t>(micro))) : out;
}

Shape MlpPipeline::activation_shape(int piece) const {
  return {rows_, dims_[static_cast<size_t>(bounds_[static_cast<size_t>(piece + 1)])]};
}

std::vector<std::span<const float>> MlpPipeline::param_buffers() const {
  std::vector<std::span<const float>> out;
  for (auto& p : mine_) out.push_back(std::span<const float>(p->flat_params().data(), static_cast<size_t>(p->num_params())));
  return out;
}

}  // namespace dtrain
