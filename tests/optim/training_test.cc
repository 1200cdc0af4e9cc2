// End-to-end learning: a tiny MLP learns XOR (Adam) and a linearly separable problem (SGD
// with momentum over a thread pool) — the whole stack, tensor to optimizer.
#include <gtest/gtest.h>

#include "autograd/loss.h"
#include "base/thread_pool.h"
#include "nn/mlp.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "tensor/random.h"

namespace dtrain {
namespace {

Tensor random_batch(int64_t b, int64_t d, uint64_t seed) {
  Tensor x = Tensor::empty({b, d});
  Rng(seed).fill_normal(x.span(), 0.0f, 1.0f);
  return x;
}

TEST(Mlp, LearnsXor) {
  MLP m("2-16-2", {.seed = 5});
  Adam opt(m.num_params(), {.lr = 0.05f});
  Tensor x = Tensor::from({4, 2}, {0, 0, 0, 1, 1, 0, 1, 1});
  std::vector<int32_t> y = {0, 1, 1, 0};
  float loss = 0;
  for (int step = 0; step < 500; ++step) {
    loss = m.loss_and_grad(x, y);
    opt.step(m.param_span(), m.grad_span());
  }
  EXPECT_LT(loss, 0.05f);
  EXPECT_EQ(m.predict(x), y);
}

TEST(Mlp, LearnsALinearlySeparableProblemWithSgd) {
  // Label = [w.x > 0] for a fixed w; a single linear layer must reach >= 97% accuracy.
  const int64_t n = 512, d = 10;
  Tensor x = random_batch(n, d, 11);
  std::vector<int32_t> y(n);
  for (int64_t i = 0; i < n; ++i) {
    float s = 0;
    for (int64_t j = 0; j < d; ++j) s += x.at({i, j}) * static_cast<float>(j % 3 - 1);
    y[i] = s > 0;
  }
  MLP m("10-2", {.seed = 2});
  Sgd opt(m.num_params(), {.lr = 0.5f, .momentum = 0.9f});
  ThreadPool pool(2);
  for (int step = 0; step < 200; ++step) {
    m.loss_and_grad(x, y, &pool);
    opt.step(m.param_span(), m.grad_span());
  }
  EXPECT_GE(accuracy(m.logits(x), y), 0.97f);
}

}  // namespace
}  // namespace dtrain
