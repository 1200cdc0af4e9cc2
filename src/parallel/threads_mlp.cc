// MlpModel: the TrainableModel adapter for nn/mlp.h. Every replica is its own MLP object
// bound to the parameters it is asked to evaluate at and to the caller's gradient buffer,
// so replicas share no mutable state.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/loss.h"
#include "base/copy.h"
#include "base/error.h"
#include "base/thread_pool.h"
#include "nn/mlp.h"
#include "parallel/threads_model.h"

namespace dtrain {
namespace {

// Gathers rows `examples` of a dense dataset into x (B, D) and their labels. The buffers
// grow to exactly the largest batch seen (reserve, not resize's doubling): ddp's measured
// cut moves a rank's share by an item or two (parallel/batch_split.h), and doubling on each
// new high would keep twice the input rows the planner prices (0.1 MB at 32 rows of 784).
void gather(const data::Dataset& ds, std::span<const int64_t> examples, std::vector<float>& x,
            std::vector<int32_t>& y) {
  const size_t values = examples.size() * static_cast<size_t>(ds.cols);
  if (x.capacity() < values) x.reserve(values);
  if (y.capacity() < examples.size()) y.reserve(examples.size());
  x.resize(values);
  y.resize(examples.size());
  for (size_t i = 0; i < examples.size(); ++i) {
    const float* row = ds.dense_row(examples[i]);
    copy_elements(x.data() + i * static_cast<size_t>(ds.cols), row, static_cast<size_t>(ds.cols));
    y[i] = ds.labels[static_cast<size_t>(examples[i])];
  }
}

// Mean cross-entropy and correct count from logits (B, K).
void score_logits(const Tensor& logits, std::span<const int32_t> y, double* loss_sum, int64_t* correct) {
  const int64_t b = logits.dim(0), k = logits.dim(1);
  const float* z = logits.data();
  for (int64_t i = 0; i < b; ++i) {
    const float* row = z + i * k;
    const float mx = *std::max_element(row, row + k);
    double sum = 0;
    for (int64_t c = 0; c < k; ++c) sum += std::exp(static_cast<double>(row[c] - mx));
    *loss_sum += std::log(sum) + mx - row[y[static_cast<size_t>(i)]];
    *correct += (std::max_element(row, row + k) - row) == y[static_cast<size_t>(i)];
  }
}

class MlpReplica : public Replica {
 public:
  MlpReplica(const std::string& spec, const data::Dataset& ds)
      : mlp_(spec, MlpOptions{.allocate = false}), ds_(ds) {}

  LossAcc loss_grad(std::span<const float> params, std::span<const int64_t> examples,
                    std::span<float> grad) override {
    LossAcc r;
    r.examples = static_cast<int64_t>(examples.size());
    if (examples.empty()) {
      std::fill(grad.begin(), grad.end(), 0.0f);
      return r;
    }
    gather(ds_, examples, x_, y_);
    // The MLP only reads its parameter buffer; bind() wants a mutable span.
    std::span<float> p(const_cast<float*>(params.data()), params.size());
    // Scoring only (no gradient asked for) still binds a gradient buffer: made on first use,
    // so a replica that always gets one (every strategy's) holds no model-sized spare.
    if (grad.empty() && scratch_grad_.empty()) scratch_grad_.resize(params.size());
    mlp_.bind(p, grad.empty() ? std::span<float>(scratch_grad_) : grad);
    Tensor x = Tensor::wrap(x_.data(), {r.examples, ds_.cols});
    if (grad.empty()) {
      Tensor logits = mlp_.logits(x);
      score_logits(logits, y_, &r.loss, &r.correct);
      r.loss /= static_cast<double>(r.examples);
      return r;
    }
    Graph g;
    Var logits = mlp_.forward(g, x);
    Var loss = cross_entropy(logits, y_);
    g.backward(loss);
    r.loss = loss.item();
    double unused = 0;
    score_logits(logits.value(), y_, &unused, &r.correct);
    return r;
  }

  // Layer i's weight and bias are adjacent in the flat buffer; backward finishes the last
  // layer first.
  std::vector<GradRange> grad_units(int64_t) const override {
    MLP& m = const_cast<MLP&>(mlp_);
    std::vector<GradRange> forward_order;
    int64_t off = 0;
    for (int64_t i = 0; i < m.num_layers(); ++i) {
      Linear& l = m.layer(i);
      const int64_t len = l.weight().numel + (l.bias() ? l.bias()->numel : 0);
      forward_order.push_back(GradRange{off, len});
      off += len;
    }
    return std::vector<GradRange>(forward_order.rbegin(), forward_order.rend());
  }

  // Backward layer by layer: every layer gets its own Graph whose input is a leaf holding the
  // previous layer's output, so after graph i's backward the gradient of layer i's
  // parameters is final and the leaf's gradient seeds graph i-1. The ops and their order are
  // those of the one-graph pass, so the bits are the same.
  LossAcc loss_grad_staged(std::span<const float> params, std::span<const int64_t> examples, std::span<float> grad,
                           const GradReadyFn& ready, float grad_scale) override {
    LossAcc r;
    r.examples = static_cast<int64_t>(examples.size());
    std::span<float> p(const_cast<float*>(params.data()), params.size());
    mlp_.bind(p, grad);
    const std::vector<GradRange> units = grad_units(static_cast<int64_t>(params.size()));
    if (examples.empty()) {
      std::fill(grad.begin(), grad.end(), 0.0f);
      if (ready)
        for (const GradRange& u : units) ready(u);
      return r;
    }
    gather(ds_, examples, x_, y_);
    Tensor x = Tensor::wrap(x_.data(), {r.examples, ds_.cols});
    const int64_t layers = mlp_.num_layers();
    std::vector<std::unique_ptr<Graph>> graphs;
    std::vector<Var> in, out;
    for (int64_t i = 0; i < layers; ++i) {
      graphs.push_back(std::make_unique<Graph>());
      Graph& g = *graphs.back();
      in.push_back(i == 0 ? g.input(x) : g.leaf(out.back().value(), true));
      out.push_back(mlp_.layer(i).forward(g, in.back()));
    }
    Var loss = cross_entropy(out.back(), y_);
    if (grad_scale == 1.0f)
      graphs.back()->backward(loss);
    else
      graphs.back()->backward(loss, Tensor::full(loss.value().shape(), grad_scale));
    r.loss = loss.item();
    double unused = 0;
    score_logits(out.back().value(), y_, &unused, &r.correct);
    if (ready) ready(units[0]);
    for (int64_t i = layers - 2; i >= 0; --i) {
      graphs[static_cast<size_t>(i)]->backward(out[static_cast<size_t>(i)], in[static_cast<size_t>(i) + 1].grad());
      if (ready) ready(units[static_cast<size_t>(layers - 1 - i)]);
    }
    return r;
  }

 private:
  MLP mlp_;
  const data::Dataset& ds_;
  std::vector<float> scratch_grad_;
  std::vector<float> x_;
  std::vector<int32_t> y_;
};

class MlpModel : public TrainableModel {
 public:
  MlpModel(const std::string& spec, const data::Dataset& train, uint64_t seed)
      : master_(spec, MlpOptions{.seed = seed, .gradients = false}), spec_(master_.spec()), train_(train),
        num_params_(master_.num_params()) {
    DT_CHECK(!train.sparse, InvalidArgument,
             "mlp:" << spec << " needs dense features but " << train.source
                    << " is sparse; use --model logreg, svm or softmax");
    DT_CHECK(master_.input_dim() == train.cols, InvalidArgument,
             "mlp:" << spec << " takes " << master_.input_dim() << " inputs but " << train.source << " has "
                    << train.cols << " features; start the spec with " << train.cols);
    DT_CHECK(master_.output_dim() == train.num_classes, InvalidArgument,
             "mlp:" << spec << " has " << master_.output_dim() << " outputs but " << train.source << " has "
                    << train.num_classes << " classes; end the spec with " << train.num_classes);
  }
  std::string describe() const override {
    return "mlp " + spec_ + " (" + std::to_string(num_params()) + " parameters)";
  }
  // Cached: Module::num_params() walks (and renames) the parameter tree, which is not safe
  // to do from several threads at once (the async parameter server's threads call this).
  int64_t num_params() const override { return num_params_; }
  std::span<float> params() override { return master_.param_span(); }
  const data::Dataset& train_set() const override { return train_; }
  std::unique_ptr<Replica> make_replica() override { return std::make_unique<MlpReplica>(spec_, train_); }

  std::vector<float> probabilities(const data::Dataset& ds) override {
    DT_CHECK(!ds.sparse && ds.cols == master_.input_dim(), InvalidArgument,
             ds.source << " does not match the model's " << master_.input_dim() << " dense inputs");
    const int64_t k = master_.output_dim();
    std::vector<float> out(static_cast<size_t>(ds.rows * k));
    constexpr int64_t kChunk = 1000;
    std::vector<float> x;
    std::vector<int32_t> y;
    for (int64_t lo = 0; lo < ds.rows; lo += kChunk) {
      const int64_t hi = std::min(ds.rows, lo + kChunk);
      std::vector<int64_t> ids(static_cast<size_t>(hi - lo));
      std::iota(ids.begin(), ids.end(), lo);
      gather(ds, ids, x, y);
      Tensor logits = master_.logits(Tensor::wrap(x.data(), {hi - lo, ds.cols}));
      const float* z = logits.data();
      for (int64_t i = 0; i < hi - lo; ++i) {
        const float* row = z + i * k;
        const float mx = *std::max_element(row, row + k);
        double sum = 0;
        for (int64_t c = 0; c < k; ++c) sum += std::exp(static_cast<double>(row[c] - mx));
        float* o = out.data() + (lo + i) * k;
        for (int64_t c = 0; c < k; ++c) o[c] = static_cast<float>(std::exp(static_cast<double>(row[c] - mx)) / sum);
      }
    }
    return out;
  }

  LossAcc evaluate(const data::Dataset& ds, ThreadPool* pool) override {
    DT_CHECK(!ds.sparse && ds.cols == master_.input_dim(), InvalidArgument,
             ds.source << " does not match the model's " << master_.input_dim() << " dense inputs");
    // Fixed chunks of 1000 rows, reduced in chunk order. Every thread runs the master module
    // itself (inference only: nn/module.h lets threads share one module for that), each with
    // its own gathered rows; a replica would hold a model-sized gradient buffer it never uses.
    constexpr int64_t kChunk = 1000;
    const int64_t chunks = (ds.rows + kChunk - 1) / kChunk;
    std::vector<LossAcc> parts(static_cast<size_t>(chunks));
    auto run = [&](int64_t lo, int64_t hi) {
      std::vector<float> x;
      std::vector<int32_t> y;
      for (int64_t c = lo; c < hi; ++c) {
        std::vector<int64_t> ids(static_cast<size_t>(std::min(ds.rows, (c + 1) * kChunk) - c * kChunk));
        std::iota(ids.begin(), ids.end(), c * kChunk);
        gather(ds, ids, x, y);
        LossAcc& r = parts[static_cast<size_t>(c)];
        r.examples = static_cast<int64_t>(ids.size());
        Tensor logits = master_.logits(Tensor::wrap(x.data(), {r.examples, ds.cols}));
        score_logits(logits, y, &r.loss, &r.correct);
        r.loss /= static_cast<double>(r.examples);
      }
    };
    if (pool) pool->parallel_for(0, chunks, 1, run);
    else run(0, chunks);
    LossAcc total;
    for (const auto& p : parts) {
      total.loss += p.loss * static_cast<double>(p.examples);
      total.correct += p.correct;
      total.examples += p.examples;
    }
    if (total.examples) total.loss /= static_cast<double>(total.examples);
    return total;
  }

 private:
  // The parameters every replica binds, and the model inference runs; it keeps no gradient
  // buffer (each replica has its own), one model-sized buffer less per process.
  MLP master_;
  std::string spec_;
  const data::Dataset& train_;
  int64_t num_params_;
};

}  // namespace

std::vector<float> TrainableModel::probabilities(const data::Dataset&) {
  DT_THROW(InvalidArgument, describe() << " gives no class probabilities; ensembles need --model mlp:...");
}

std::unique_ptr<TrainableModel> make_mlp_model(const std::string& spec, const data::Dataset& train, uint64_t seed) {
  return std::make_unique<MlpModel>(spec, train, seed);
}

}  // namespace dtrain
