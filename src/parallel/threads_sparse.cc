// SparseModel: the TrainableModel adapter for nn/sparse_linear.h.
#include <algorithm>
#include <mutex>
#include <numeric>

#include "base/error.h"
#include "base/thread_pool.h"
#include "parallel/threads_model.h"

namespace dtrain {
namespace {

class SparseReplica : public Replica {
 public:
  SparseReplica(const SparseLinear& model, const data::Dataset& ds) : model_(model), ds_(ds) {}
  LossAcc loss_grad(std::span<const float> params, std::span<const int64_t> examples,
                    std::span<float> grad) override {
    LossAcc r;
    r.examples = static_cast<int64_t>(examples.size());
    r.loss = model_.loss_grad(params, ds_, examples, grad, &r.correct);
    return r;
  }

 private:
  const SparseLinear& model_;
  const data::Dataset& ds_;
};

class SparseModel : public TrainableModel {
 public:
  SparseModel(SparseLoss loss, const data::Dataset& train, float l2)
      : model_(loss, train.cols, train.num_classes, l2), train_(train),
        params_(static_cast<size_t>(model_.num_params()), 0.0f) {
    DT_CHECK(train.sparse, InvalidArgument,
             sparse_loss_name(loss) << " reads sparse rows, but " << train.source
                                    << " is dense; use --model mlp:... or LIBSVM data");
  }
  std::string describe() const override { return model_.describe(); }
  int64_t num_params() const override { return model_.num_params(); }
  std::span<float> params() override { return params_; }
  const data::Dataset& train_set() const override { return train_; }
  std::unique_ptr<Replica> make_replica() override { return std::make_unique<SparseReplica>(model_, train_); }
  const SparseLinear* sparse() const override { return &model_; }

  LossAcc evaluate(const data::Dataset& ds, ThreadPool* pool) override {
    DT_CHECK(ds.cols <= model_.features(), InvalidArgument,
             ds.source << " has " << ds.cols << " features, the model " << model_.features());
    // Fixed ranges of 4096 rows, reduced in range order: deterministic for any pool.
    constexpr int64_t kChunk = 4096;
    const int64_t chunks = (ds.rows + kChunk - 1) / kChunk;
    std::vector<LossAcc> parts(static_cast<size_t>(chunks));
    auto run = [&](int64_t lo, int64_t hi) {
      for (int64_t c = lo; c < hi; ++c) {
        std::vector<int64_t> ids(static_cast<size_t>(std::min(ds.rows, (c + 1) * kChunk) - c * kChunk));
        std::iota(ids.begin(), ids.end(), c * kChunk);
        LossAcc& p = parts[static_cast<size_t>(c)];
        p.examples = static_cast<int64_t>(ids.size());
        p.loss = model_.loss_grad(params_, ds, ids, {}, &p.correct) * static_cast<double>(p.examples);
      }
    };
    if (pool) pool->parallel_for(0, chunks, 1, run);
    else run(0, chunks);
    LossAcc total;
    for (const auto& p : parts) {
      total.loss += p.loss;
      total.correct += p.correct;
      total.examples += p.examples;
    }
    if (total.examples) total.loss /= static_cast<double>(total.examples);
    return total;
  }

 private:
  SparseLinear model_;
  const data::Dataset& train_;
  std::vector<float> params_;
};

}  // namespace

std::unique_ptr<TrainableModel> make_sparse_model(SparseLoss loss, const data::Dataset& train, float l2) {
  return std::make_unique<SparseModel>(loss, train, l2);
}

}  // namespace dtrain
