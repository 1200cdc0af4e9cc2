// Tensor parallelism: each conjugate op against its closed form (forward value and backward
// gradient, k = 1, 2, 4), column/row-parallel Linear and the Megatron MLP against the dense
// layers (outputs and every gradient), the GPT with heads split against the dense GPT, the
// collective counts (one all-reduce per MLP per direction, two per block), and a k-rank
// GPT that trains to the dense model's losses.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "autograd/ops.h"
#include "base/error.h"
#include "tensor/ops.h"
#include "nn/layers.h"
#include "parallel/tensor_parallel.h"
#include "support/world.h"
#include "tensor/blas.h"
#include "tensor/random.h"

namespace dtrain {
namespace {

using testing::run_world;

Tensor rnd(const Shape& s, uint64_t seed) {
  Tensor t = Tensor::empty(s);
  Rng r(seed);
  r.fill_normal(t.span(), 0.0f, 1.0f);
  return t;
}

// Runs fn(tp) on k thread-ranks; k == 1 uses a group of one without a communicator.
void on_ranks(int k, const std::function<void(TpGroup&)>& fn) {
  set_blas_threads(1);
  if (k == 1) {
    TpGroup tp;
    fn(tp);
    return;
  }
  run_world(k, TransportKind::kShm, [&](Communicator& c) {
    TpGroup tp(&c);
    fn(tp);
  });
}

class Conjugate : public ::testing::TestWithParam<int> {};

// forward y = op(x_r); loss = sum(y * R_r); checks y and dL/dx_r against closed forms.
TEST_P(Conjugate, OpsMatchTheirClosedForms) {
  const int k = GetParam();
  const int64_t rows = 4, c = 3;
  on_ranks(k, [&](TpGroup& tp) {
    const int r = tp.rank();
    auto xs = [&](int q) { return rnd({rows, c}, 100 + q); };      // rank q's input
    auto seeds = [&](int q) { return rnd({rows, c}, 200 + q); };   // rank q's output gradient
    auto sum_over = [&](auto f) {
      Tensor s = Tensor::zeros({rows, c});
      for (int q = 0; q < k; ++q) axpy_(1.0f, f(q), s);
      return s;
    };
    {  // copy_to: y = x; dx = sum_q R_q
      Graph g;
      Var x = g.leaf(xs(0));
      Var y = copy_to_tp(tp, x);
      g.backward(y, seeds(r));
      EXPECT_EQ(max_abs_diff(y.value(), xs(0)), 0.0f);
      EXPECT_LT(max_abs_diff(x.grad(), sum_over(seeds)), 1e-5f);
    }
    {  // reduce_from: y = sum_q x_q; dx = R (all ranks seed the same R)
      Graph g;
      Var x = g.leaf(xs(r));
      Var y = reduce_from_tp(tp, x);
      g.backward(y, seeds(0));
      EXPECT_LT(max_abs_diff(y.value(), sum_over(xs)), 1e-5f);
      EXPECT_EQ(max_abs_diff(x.grad(), seeds(0)), 0.0f);
    }
    // A group of one communicates nothing. Otherwise copy_to and reduce_from issue one
    // all-reduce each, in opposite directions.
    EXPECT_EQ(tp.counts().allreduce_fwd, k == 1 ? 0 : 1);
    EXPECT_EQ(tp.counts().allreduce_bwd, k == 1 ? 0 : 1);
    EXPECT_EQ(tp.counts().total(), k == 1 ? 0 : 2);
  });
}

INSTANTIATE_TEST_SUITE_P(K, Conjugate, ::testing::Values(1, 2, 4));



GptConfig small_gpt() {
  GptConfig c;
  c.vocab = 11;
  c.layers = 2;
  c.heads = 4;
  c.width = 16;
  c.context = 6;
  return c;
}

std::vector<int32_t> toks(int64_t n, int64_t v, int salt) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 7 + salt + i * i) % v));
  return t;
}

class GptTensorParallel : public ::testing::TestWithParam<int> {};

TEST_P(GptTensorParallel, ShardedModelEqualsDenseAndCountsCollectives) {
  const int k = GetParam();
  const GptConfig c = small_gpt();
  const int64_t batch = 2, seq = 6;
  std::vector<int32_t> x = toks(batch * seq, c.vocab, 1), y = toks(batch * seq, c.vocab, 2);
  GptStage dense(c, 0, c.num_units());
  dense.allocate(0);
  dense.init_gpt(5);
  Graph g;
  Var loss = dense.forward_stage(g, Var(), x, y, batch, seq);
  g.backward(loss);
  on_ranks(k, [&](TpGroup& tp) {
    GptStage shard(c, 0, c.num_units(), k);
    shard.allocate(0);
    shard_gpt_from_dense(dense, shard, tp.rank());
    TpHooks hooks(tp);
    Graph g;
    Var l = shard.forward_stage(g, Var(), x, y, batch, seq, &hooks);
    EXPECT_EQ(tp.counts().allreduce_fwd, k == 1 ? 0 : 2 * c.layers);  // attention + MLP, per block
    g.backward(l);
    EXPECT_EQ(tp.counts().allreduce_bwd, k == 1 ? 0 : 2 * c.layers);
    EXPECT_EQ(tp.counts().total(), k == 1 ? 0 : 4 * c.layers);
    EXPECT_NEAR(l.item(), loss.item(), 1e-5f);
    std::map<std::string, Parameter*> ref;
    for (Parameter* p : dense.parameters()) ref[p->name] = p;
    for (Parameter* p : shard.parameters())
      EXPECT_LT(max_abs_diff(p->grad, tp_slice(ref.at(p->name)->grad, tp_split(p->name), tp.rank(), k)), 2e-5f)
          << p->name;
  });
}

TEST_P(GptTensorParallel, TrainsToTheDenseLosses) {
  const int k = GetParam();
  const GptConfig c = small_gpt();
  const int64_t batch = 3, seq = 6;
  const int steps = 8;
  auto train = [&](GptStage& m, TpHooks* hooks) {
    std::vector<float> losses;
    for (int s = 0; s < steps; ++s) {
      std::vector<int32_t> x = toks(batch * seq, c.vocab, 3 * s), y = toks(batch * seq, c.vocab, 3 * s + 1);
      Graph g;
      Var l = m.forward_stage(g, Var(), x, y, batch, seq, hooks);
      g.backward(l);
      std::span<float> p = m.param_span(), gr = m.grad_span();
      for (size_t i = 0; i < p.size(); ++i) p[i] -= 0.3f * gr[i];
      losses.push_back(l.item());
    }
    return losses;
  };
  GptStage dense(c, 0, c.num_units());
  dense.allocate(0);
  dense.init_gpt(9);
  GptStage start(c, 0, c.num_units());
  start.allocate(0);
  start.init_gpt(9);
  std::vector<float> ref = train(dense, nullptr);
  EXPECT_LT(ref.back(), ref.front());
  on_ranks(k, [&](TpGroup& tp) {
    GptStage shard(c, 0, c.num_units(), k);
    shard.allocate(0);
    shard_gpt_from_dense(start, shard, tp.rank());
    TpHooks hooks(tp);
    std::vector<float> got = train(shard, &hooks);
    for (int s = 0; s < steps; ++s) EXPECT_NEAR(got[static_cast<size_t>(s)], ref[static_cast<size_t>(s)], 1e-4f) << "step " << s;
  });
}

INSTANTIATE_TEST_SUITE_P(K, GptTensorParallel, ::testing::Values(1, 2, 4));

TEST(TensorParallel, RefusesSplitsThatDoNotDivide) {
  EXPECT_THROW(GptStage(small_gpt(), 0, 4, 3), InvalidArgument);  // 4 heads over 3 ranks
}

}  // namespace
}  // namespace dtrain
