// tests/parallel/mp_test_util.h — helpers for the model-parallel tests: a small text the tests
// write themselves (no shared data needed), a small GPT config, and "train S steps on a mesh
// of thread-ranks, return the losses and the final dense parameters".
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "data/text.h"
#include "nn/transformer.h"
#include "parallel/model_parallel.h"
#include "support/world.h"
#include "tensor/blas.h"

namespace dtrain::testing {

inline const data::TextData& tiny_text() {
  static const data::TextData text = [] {
    const char* lines[] = {"ROMEO:\nBut soft, what light through yonder window breaks?\n",
                           "JULIET:\nO Romeo, Romeo, wherefore art thou Romeo?\n",
                           "HAMLET:\nTo be, or not to be, that is the question.\n",
                           "MACBETH:\nTomorrow, and tomorrow, and tomorrow.\n"};
    std::string s;
    for (int i = 0; i < 60; ++i) s += lines[(i * 7 + i / 3) % 4];
    return data::text_from_string(s, "tiny");
  }();
  return text;
}

inline GptConfig tiny_gpt(int layers = 4) {
  GptConfig c;
  c.vocab = static_cast<int64_t>(tiny_text().vocab.size());
  c.layers = layers;
  c.heads = 4;
  c.width = 16;
  c.context = 8;
  return c;
}

inline MpConfig tiny_mp(const MeshShape& mesh, int micro = 2) {
  MpConfig c;
  c.model = tiny_gpt();
  c.mesh = mesh;
  c.micro = micro;
  c.batch = 8;
  c.optimizer.lr = 3e-3f;
  c.lr = LrSchedule::warmup_cosine(3e-3f, 2, 10);
  c.clip = 1.0f;
  c.eval_batches = 2;
  return c;
}

struct MpRun {
  std::vector<float> losses;
  float val = 0;
  std::vector<float> dense;  // parameters after training
  std::vector<MpStats> stats;  // per world rank
};

inline MpRun train_mesh(const MpConfig& cfg, int steps) {
  set_blas_threads(1);
  MpRun out;
  out.stats.resize(static_cast<size_t>(cfg.mesh.size()));
  std::mutex mu;
  run_world(cfg.mesh.size(), TransportKind::kShm, [&](Communicator& world) {
    GptTrainer t(world, cfg, tiny_text());
    std::vector<float> losses;
    for (int s = 0; s < steps; ++s) losses.push_back(t.step());
    const float val = t.evaluate();
    GptStage dense(cfg.model, 0, cfg.model.num_units());
    dense.allocate(0);
    t.gather_dense(dense);
    MpStats st = t.stats();
    std::lock_guard<std::mutex> lock(mu);
    out.stats[static_cast<size_t>(world.rank())] = st;
    if (world.rank() == 0) {
      out.losses = losses;
      out.val = val;
      out.dense.assign(dense.param_span().begin(), dense.param_span().end());
    }
  });
  return out;
}

inline float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 1e30f;
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace dtrain::testing
