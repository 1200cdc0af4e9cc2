// nn/transformer_sample.h — GPT checkpoints and text sampling (what `dtrain generate` runs).
//
// Checkpoint format (one file, written whole then renamed into place):
//   line 1  "dtrain-gpt 1"
//   line 2  the model spec, e.g. "gpt:layers=4,heads=4,width=128,context=64"
//   line 3  "vocab N" followed by N bytes (the character set, in id order) and "\n"
//   line 4  "step S val V params P"
//   then P little-endian float32 parameters in the dense model's layout (GptStage(0, L+2)).
// load_gpt_checkpoint checks the magic, that P equals the spec's parameter count and that
// the file is not truncated; any problem is Corrupt / IoError naming the path.
//
// Sampling: sample_gpt(model, prompt ids, n, temperature, top_k, seed) appends n ids: each
// step runs the model on the last `context` ids (no recording), divides the last position's
// logits by the temperature, keeps the top_k largest (0 = all), and draws from the softmax
// with a SplitMix64 stream seeded by `seed` (the same seed gives the same text).
// temperature must be > 0.
// Thread-safety: pure functions (the model is only read).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/transformer.h"

namespace dtrain {

struct GptCheckpoint {
  GptConfig config;
  std::vector<uint8_t> vocab;
  int64_t step = 0;
  double val_loss = 0;
  std::vector<float> params;
};

void save_gpt_checkpoint(const std::string& path, const GptCheckpoint& ckpt);
GptCheckpoint load_gpt_checkpoint(const std::string& path);

std::vector<int32_t> sample_gpt(GptStage& model, std::vector<int32_t> prompt, int64_t n, float temperature, int top_k,
                                uint64_t seed);

}  // namespace dtrain
