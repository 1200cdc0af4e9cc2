// The GPT model: spec parsing, parameter count by formula, layout by units, stages that
// compose to the whole model (same loss, same gradients), a finite-difference check of the
// whole model's gradient, and a tiny model that learns a text it writes itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "base/error.h"
#include "nn/transformer.h"

namespace dtrain {
namespace {

GptConfig tiny() {
  GptConfig c;
  c.vocab = 7;
  c.layers = 2;
  c.heads = 2;
  c.width = 8;
  c.context = 5;
  return c;
}

std::vector<int32_t> tokens_for(int64_t n, int64_t vocab, int salt) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = static_cast<int32_t>((i * 3 + salt + i / 4) % vocab);
  return t;
}

TEST(GptConfig, ParsesAndRefuses) {
  GptConfig c = GptConfig::parse("gpt:layers=3,heads=2,width=16,context=32", 65);
  EXPECT_EQ(c.layers, 3);
  EXPECT_EQ(c.heads, 2);
  EXPECT_EQ(c.width, 16);
  EXPECT_EQ(c.context, 32);
  EXPECT_EQ(c.vocab, 65);
  EXPECT_EQ(c.spec(), "gpt:layers=3,heads=2,width=16,context=32");
  EXPECT_EQ(GptConfig::parse("gpt", 10).layers, 4);
  EXPECT_THROW(GptConfig::parse("gpt:layers=2,depth=3", 10), InvalidArgument);
  EXPECT_THROW(GptConfig::parse("gpt:width=10,heads=4", 10), InvalidArgument);
  EXPECT_THROW(GptConfig::parse("gpt:layers=0", 10), InvalidArgument);
  EXPECT_THROW(GptConfig::parse("gpt:layers=x", 10), InvalidArgument);
}

TEST(Gpt, ParameterCountMatchesTheFormula) {
  for (GptConfig c : {tiny(), GptConfig::parse("gpt:layers=4,heads=4,width=128,context=128", 65)}) {
    const int64_t w = c.width;
    const int64_t block = 12 * w * w + 13 * w;  // qkv 3w^2+3w, proj w^2+w, fc 4w^2+4w, fc2 4w^2+w, 2 LN 4w
    const int64_t expect = c.vocab * w + c.context * w + c.layers * block + 2 * w + c.vocab * w;
    EXPECT_EQ(gpt_num_params(c), expect);
  }
  // The example size has about 1M parameters or more.
  EXPECT_GT(gpt_num_params(GptConfig::parse("gpt:layers=4,heads=4,width=128,context=128", 65)), 800000);
}

TEST(Gpt, UnitsAreContiguousRangesInModelOrder) {
  GptConfig c = tiny();
  GptStage full(c, 0, c.num_units());
  full.allocate(0);
  int64_t off = 0;
  for (int u = 0; u < c.num_units(); ++u) {
    EXPECT_EQ(full.unit_offset(u), off);
    off += full.unit_numel(u);
  }
  EXPECT_EQ(off, full.num_params());
  std::vector<Parameter*> ps = full.parameters();
  EXPECT_EQ(ps.front()->name, "embed.wte");
  EXPECT_EQ(ps.back()->name, "head.ln_f.bias");
  EXPECT_EQ(tp_split("blocks.1.attn.qkv.weight"), TpSplit::kRows3);
  EXPECT_EQ(tp_split("blocks.1.mlp.proj.weight"), TpSplit::kCols);
  EXPECT_EQ(tp_split("blocks.1.mlp.proj.bias"), TpSplit::kReplicated);
}

// Runs stages [0,2), [2,3), [3,4) in sequence (as a pipeline would, passing values and
// gradients by hand) and compares with the whole model.
TEST(Gpt, StagesComposeToTheWholeModel) {
  GptConfig c = tiny();
  const int64_t batch = 2, seq = 5, n = batch * seq;
  std::vector<int32_t> x = tokens_for(n, c.vocab, 1), y = tokens_for(n, c.vocab, 2);
  GptStage full(c, 0, c.num_units());
  full.allocate(0);
  full.init_gpt(42);
  Graph g;
  Var loss = full.forward_stage(g, Var(), x, y, batch, seq);
  g.backward(loss);

  std::vector<std::unique_ptr<GptStage>> stages;
  const int cuts[] = {0, 2, 3, 4};
  for (int s = 0; s < 3; ++s) {
    stages.push_back(std::make_unique<GptStage>(c, cuts[s], cuts[s + 1]));
    stages.back()->allocate(0);
    stages.back()->init_gpt(42);  // by name: the same values as the whole model's
  }
  std::vector<std::unique_ptr<Graph>> graphs;
  std::vector<Var> ins, outs;
  Tensor act;
  for (int s = 0; s < 3; ++s) {
    graphs.push_back(std::make_unique<Graph>());
    Var in = s == 0 ? Var() : graphs[static_cast<size_t>(s)]->leaf(act);
    ins.push_back(in);
    outs.push_back(stages[static_cast<size_t>(s)]->forward_stage(*graphs[static_cast<size_t>(s)], in, x, y, batch, seq));
    act = outs.back().value();
  }
  EXPECT_EQ(outs.back().item(), loss.item());
  Tensor seed;
  for (int s = 2; s >= 0; --s) {
    if (s == 2) graphs[2]->backward(outs[2]);
    else graphs[static_cast<size_t>(s)]->backward(outs[static_cast<size_t>(s)], seed);
    if (s > 0) seed = ins[static_cast<size_t>(s)].grad();
  }
  // Every stage parameter's gradient equals the whole model's, by name.
  std::vector<Parameter*> all = full.parameters();
  int compared = 0;
  for (auto& st : stages)
    for (Parameter* p : st->parameters())
      for (Parameter* q : all)
        if (q->name == p->name) {
          EXPECT_EQ(max_abs_diff(p->value, q->value), 0.0f) << p->name;
          EXPECT_LT(max_abs_diff(p->grad, q->grad), 1e-6f) << p->name;
          ++compared;
        }
  EXPECT_EQ(compared, static_cast<int>(all.size()));
}

TEST(Gpt, GradientMatchesFiniteDifferences) {
  GptConfig c = tiny();
  c.layers = 1;
  const int64_t batch = 2, seq = 4, n = batch * seq;
  std::vector<int32_t> x = tokens_for(n, c.vocab, 3), y = tokens_for(n, c.vocab, 4);
  GptStage m(c, 0, c.num_units());
  m.allocate(0);
  m.init_gpt(7);
  // Larger weights than GPT's 0.02 so every path carries signal.
  for (float& v : m.param_span()) v *= 10.0f;
  auto loss_at = [&]() {
    Graph g(nullptr, false);
    return static_cast<double>(m.forward_stage(g, Var(), x, y, batch, seq).item());
  };
  Graph g;
  g.backward(m.forward_stage(g, Var(), x, y, batch, seq));
  std::vector<float> grad(m.grad_span().begin(), m.grad_span().end());
  std::span<float> p = m.param_span();
  const float eps = 2e-3f;
  double worst = 0;
  for (size_t i = 0; i < p.size(); i += 7) {
    const float keep = p[i];
    p[i] = keep + eps;
    const double up = loss_at();
    p[i] = keep - eps;
    const double down = loss_at();
    p[i] = keep;
    const double fd = (up - down) / (2.0 * eps);
    worst = std::max(worst, std::abs(fd - grad[i]) / std::max(0.05, std::abs(fd)));
  }
  EXPECT_LT(worst, 0.03);
}

// Plain SGD on a repeated sentence: the loss must fall well below log(vocab).
TEST(Gpt, LearnsATinyText) {
  const std::string text = "to be or not to be, that is the question. ";
  std::vector<char> vocab;
  for (char ch : text)
    if (std::find(vocab.begin(), vocab.end(), ch) == vocab.end()) vocab.push_back(ch);
  GptConfig c;
  c.vocab = static_cast<int64_t>(vocab.size());
  c.layers = 2;
  c.heads = 2;
  c.width = 16;
  c.context = 8;
  GptStage m(c, 0, c.num_units());
  m.allocate(0);
  m.init_gpt(1);
  auto id = [&](char ch) { return static_cast<int32_t>(std::find(vocab.begin(), vocab.end(), ch) - vocab.begin()); };
  const int64_t batch = 8, seq = 8;
  float first = 0, last = 0;
  for (int step = 0; step < 300; ++step) {
    std::vector<int32_t> x, y;
    for (int64_t b = 0; b < batch; ++b) {
      const size_t start = static_cast<size_t>((step * 5 + b * 11) % static_cast<int64_t>(text.size() - seq - 1));
      for (int64_t t = 0; t < seq; ++t) {
        x.push_back(id(text[start + static_cast<size_t>(t)]));
        y.push_back(id(text[start + static_cast<size_t>(t) + 1]));
      }
    }
    Graph g;
    Var loss = m.forward_stage(g, Var(), x, y, batch, seq);
    g.backward(loss);
    std::span<float> p = m.param_span();
    std::span<float> gr = m.grad_span();
    for (size_t i = 0; i < p.size(); ++i) p[i] -= 0.5f * gr[i];
    if (step == 0) first = loss.item();
    last = loss.item();
  }
  EXPECT_NEAR(first, std::log(static_cast<float>(c.vocab)), 0.3f);
  EXPECT_LT(last, 0.5f * first) << "first " << first << " last " << last;
}

}  // namespace
}  // namespace dtrain
