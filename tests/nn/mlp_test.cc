// MLP and Module: spec parsing, flat-buffer layout, deterministic init, binding replicas to
// shared parameters, layers writing into flat gradients, and error messages. (Learning tests
// that need an optimizer live in tests/optim/training_test.cc.)
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "autograd/loss.h"
#include "base/error.h"
#include "base/thread_pool.h"
#include "nn/layers.h"
#include "nn/mlp.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace dtrain {
namespace {

TEST(MlpSpec, ParsesAndRejects) {
  EXPECT_EQ(MLP::parse_spec("784-256-128-10"), (std::vector<int64_t>{784, 256, 128, 10}));
  EXPECT_EQ(MLP::parse_spec("2-3"), (std::vector<int64_t>{2, 3}));
  for (const char* bad : {"", "784", "784--10", "784-0-10", "784-abc-10", "-5-3", "784-10-"}) {
    EXPECT_THROW(MLP::parse_spec(bad), InvalidArgument) << bad;
  }
  try {
    MLP::parse_spec("784-x1-10");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("784-x1-10"), std::string::npos) << e.what();
  }
}

TEST(Mlp, FlatLayoutIsContiguousInDeclarationOrder) {
  MLP m("5-4-3", {.seed = 1});
  EXPECT_EQ(m.num_params(), 5 * 4 + 4 + 4 * 3 + 3);
  std::vector<Parameter*> ps = m.parameters();
  ASSERT_EQ(ps.size(), 4u);
  EXPECT_EQ(ps[0]->name, "layers.0.weight");
  EXPECT_EQ(ps[1]->name, "layers.0.bias");
  EXPECT_EQ(ps[3]->name, "layers.1.bias");
  int64_t off = 0;
  for (Parameter* p : ps) {
    EXPECT_EQ(p->offset, off) << p->name;
    EXPECT_EQ(p->value.data(), m.flat_params().data() + off);
    EXPECT_EQ(p->grad.data(), m.flat_grads().data() + off);
    off += p->numel;
  }
  EXPECT_EQ(off, m.num_params());
  EXPECT_EQ(ps[0]->shape, (Shape{4, 5}));
}

TEST(Mlp, InitIsDeterministicAndBounded) {
  MLP a("20-30-4", {.seed = 7}), b("20-30-4", {.seed = 7}), c("20-30-4", {.seed = 8});
  EXPECT_EQ(a.flat_params().to_vector(), b.flat_params().to_vector());
  EXPECT_NE(a.flat_params().to_vector(), c.flat_params().to_vector());
  float bound = 1.0f / std::sqrt(20.0f);
  for (float v : a.layer(0).weight().value.span()) EXPECT_LE(std::fabs(v), bound);
  // Re-init gives the same values again.
  std::vector<float> before = a.flat_params().to_vector();
  a.flat_params().fill(0.0f);
  a.init(7);
  EXPECT_EQ(a.flat_params().to_vector(), before);
}

Tensor random_batch(int64_t b, int64_t d, uint64_t seed) {
  Tensor x = Tensor::empty({b, d});
  Rng(seed).fill_normal(x.span(), 0.0f, 1.0f);
  return x;
}

// Gradients from one model computed directly, for comparison with replicas.
std::vector<float> grads_of(MLP& m, const Tensor& x, const std::vector<int32_t>& y) {
  m.loss_and_grad(x, y);
  return m.flat_grads().to_vector();
}

TEST(Mlp, ReplicasShareParametersAndKeepTheirOwnGradients) {
  MLP master("6-8-3", {.seed = 3});
  std::vector<float> g1(master.num_params(), -1.0f), g2(master.num_params(), -1.0f);
  MLP r1("6-8-3", {.allocate = false}), r2("6-8-3", {.allocate = false});
  r1.bind(master.param_span(), std::span<float>(g1));
  r2.bind(master.param_span(), std::span<float>(g2));
  EXPECT_EQ(r1.layer(0).weight().value.data(), master.layer(0).weight().value.data());

  const std::vector<float> params_copy = master.flat_params().to_vector();
  Tensor xa = random_batch(4, 6, 1), xb = random_batch(4, 6, 2);
  std::vector<int32_t> ya = {0, 1, 2, 0}, yb = {2, 2, 1, 0};
  float la = r1.loss_and_grad(xa, ya);
  float lb = r2.loss_and_grad(xb, yb);
  EXPECT_EQ(g1, grads_of(master, xa, ya));
  EXPECT_EQ(g2, grads_of(master, xb, yb));
  EXPECT_NE(g1, g2);

  // Mean loss over the union = average of the halves, and so is the gradient.
  Tensor xab = Tensor::empty({8, 6});
  xab.slice(0, 0, 4).copy_from(xa);
  xab.slice(0, 4, 8).copy_from(xb);
  std::vector<int32_t> yab = {0, 1, 2, 0, 2, 2, 1, 0};
  float lab = master.loss_and_grad(xab, yab);
  EXPECT_NEAR(lab, (la + lb) / 2, 1e-5);
  std::vector<float> gab = master.flat_grads().to_vector();
  for (size_t i = 0; i < gab.size(); ++i) ASSERT_NEAR(gab[i], (g1[i] + g2[i]) / 2, 1e-5) << i;

  // A read-only binding (e.g. evaluating at another thread's weights) computes the same.
  std::vector<float> g3(master.num_params());
  const std::vector<float>& frozen = params_copy;
  MLP r3("6-8-3", {.allocate = false});
  r3.bind_readonly(std::span<const float>(frozen), std::span<float>(g3));
  r3.loss_and_grad(xa, ya);
  EXPECT_EQ(g3, g1);

  // A step on the shared buffer is seen by every replica.
  master.param_span()[0] += 1.0f;
  EXPECT_EQ(r1.layer(0).weight().value.data()[0], master.param_span()[0]);
}

// Large enough (64 x 1100 hidden) for the ops to split over the pool; element-wise and
// column-banded work gives the same bits as one thread.
// A model allocated for inference holds its parameters only: the same initial values and
// logits as a full one, no gradient buffer, and a training pass is refused with a reason.
TEST(Mlp, InferenceOnlyKeepsNoGradientsAndRefusesTraining) {
  MLP full("6-5-3", {.seed = 7});
  MLP infer("6-5-3", {.seed = 7, .gradients = false});
  ASSERT_EQ(infer.num_params(), full.num_params());
  EXPECT_TRUE(infer.grad_span().empty());
  EXPECT_FALSE(infer.flat_grads().defined());
  ASSERT_TRUE(std::equal(full.param_span().begin(), full.param_span().end(), infer.param_span().begin()));
  std::vector<float> x(4 * 6);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) * 0.25f - 0.5f;
  Tensor xt = Tensor::wrap(x.data(), {4, 6});
  Tensor a = full.logits(xt), b = infer.logits(xt);
  ASSERT_EQ(a.numel(), b.numel());
  for (int64_t i = 0; i < a.numel(); ++i) EXPECT_EQ(a.data()[i], b.data()[i]) << i;
  EXPECT_EQ(full.predict(xt), infer.predict(xt));
  std::vector<int32_t> y{0, 1, 2, 0};
  try {
    infer.loss_and_grad(xt, y);
    ADD_FAILURE() << "training an inference-only model must throw";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("no gradient buffer"), std::string::npos) << e.what();
  }
  infer.zero_grad();  // nothing to clear: not an error
  // Binding a gradient buffer makes it trainable, with the full model's gradient.
  std::vector<float> w(infer.param_span().begin(), infer.param_span().end());
  std::vector<float> g(w.size());
  infer.bind(std::span<float>(w), std::span<float>(g));
  EXPECT_EQ(infer.loss_and_grad(xt, y), full.loss_and_grad(xt, y));
  EXPECT_TRUE(std::equal(g.begin(), g.end(), full.grad_span().begin()));
}

TEST(Mlp, PoolGivesTheSameGradients) {
  MLP m("50-1100-3", {.seed = 4});
  Tensor x = random_batch(64, 50, 5);
  std::vector<int32_t> y(64);
  for (int i = 0; i < 64; ++i) y[i] = i % 3;
  float l1 = m.loss_and_grad(x, y);
  std::vector<float> g1 = m.flat_grads().to_vector();
  ThreadPool pool(2);
  float l2 = m.loss_and_grad(x, y, &pool);
  EXPECT_EQ(l1, l2);
  EXPECT_EQ(g1, m.flat_grads().to_vector());
}

// Replicas in real threads over one parameter buffer: each thread's gradients equal the
// gradients computed alone (no shared mutable state between replicas).
TEST(Mlp, ReplicasRunConcurrently) {
  MLP master("20-64-5", {.seed = 9});
  const int kThreads = 4;
  std::vector<std::vector<float>> grads(kThreads, std::vector<float>(master.num_params()));
  std::vector<Tensor> xs;
  std::vector<std::vector<int32_t>> ys;
  for (int t = 0; t < kThreads; ++t) {
    xs.push_back(random_batch(16, 20, 100 + t));
    ys.emplace_back(16);
    for (int i = 0; i < 16; ++i) ys[t][i] = (i + t) % 5;
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      MLP replica("20-64-5", {.allocate = false});
      replica.bind(master.param_span(), std::span<float>(grads[t]));
      for (int rep = 0; rep < 5; ++rep) replica.loss_and_grad(xs[t], ys[t]);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(grads[t], grads_of(master, xs[t], ys[t])) << "thread " << t;
}

TEST(Mlp, BindRejectsWrongSizes) {
  MLP m("3-2", {.allocate = false});
  std::vector<float> p(m.num_params()), g(m.num_params() + 1);
  EXPECT_THROW(m.bind(std::span<float>(p), std::span<float>(g)), InvalidArgument);
  Graph gr;
  EXPECT_THROW(m.forward(gr, Tensor::zeros({1, 3})), InvalidArgument);  // not bound yet
}

TEST(Mlp, ShapeMismatchNamesBothShapes) {
  MLP m("784-16-10", {.seed = 1});
  Graph g;
  try {
    m.forward(g, Tensor::zeros({32, 100}));
    FAIL();
  } catch (const InvalidArgument& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("[32, 100]"), std::string::npos) << what;
    EXPECT_NE(what.find("784"), std::string::npos) << what;
  }
}

TEST(Layers, LayerNormAndEmbeddingWriteIntoFlatGradients) {
  struct Net : Module {
    Embedding emb{5, 4};
    LayerNorm ln{4};
    Linear out{4, 3};
    Net() {
      add_child("emb", &emb);
      add_child("ln", &ln);
      add_child("out", &out);
    }
    Var forward(Graph& g, const Var& x) override { return out.forward(g, ln.forward(g, emb.forward(g, x))); }
    using Module::forward;
  };
  Net net;
  net.allocate(9);
  EXPECT_EQ(net.num_params(), 5 * 4 + 4 + 4 + 4 * 3 + 3);
  EXPECT_EQ(net.parameters()[0]->name, "emb.weight");
  Graph g;
  Var loss = cross_entropy(net.forward(g, Tensor::from({3}, {1, 4, 1})), std::vector<int32_t>{0, 2, 1});
  g.backward(loss);
  std::vector<float> grads = net.flat_grads().to_vector();
  // Embedding rows 0, 2, 3 were not looked up: zero gradient; rows 1 and 4 were.
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(grads[0 * 4 + j], 0.0f);
    EXPECT_EQ(grads[2 * 4 + j], 0.0f);
  }
  float row1 = 0;
  for (int j = 0; j < 4; ++j) row1 += std::fabs(grads[1 * 4 + j]);
  EXPECT_GT(row1, 0.0f);
  EXPECT_NE(net.describe().find("ln.weight [4]"), std::string::npos) << net.describe();
}

TEST(Mlp, DropoutOnlyInTraining) {
  MLP m("8-32-4", {.seed = 1, .dropout = 0.5f, .dropout_seed = 3});
  Tensor x = random_batch(2, 8, 4);
  Tensor a = m.logits(x), b = m.logits(x);
  EXPECT_EQ(max_abs_diff(a, b), 0.0f);  // eval mode: deterministic, no dropout
  Graph g1, g2;
  Tensor t1 = m.forward(g1, x).value(), t2 = m.forward(g2, x).value();
  EXPECT_GT(max_abs_diff(t1, t2), 0.0f);  // training: a fresh mask per forward
}

}  // namespace
}  // namespace dtrain
