// cli/generate_cmd.cc — `dtrain generate`: sample text from a GPT checkpoint.
//
//   dtrain generate --checkpoint FILE [--prompt TEXT] [--tokens N] [--temperature T]
//                   [--top-k K] [--seed S]
//
// Loads the model written by `dtrain train --model gpt... --checkpoint DIR` (DIR/model.gpt)
// (nn/transformer_sample.h), maps the prompt's bytes to the model's character ids (a byte
// the training text never contained is an InvalidArgument naming it), samples N more
// characters and prints prompt + sample to stdout.
#include <cstdio>
#include <string>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "nn/transformer_sample.h"
#include "tensor/blas.h"

namespace dtrain::cli {

int generate_main(const Args& args) {
  Flags f("generate", args);
  const std::string path = f.get_string("checkpoint", "", "a GPT model: DIR/model.gpt, written by dtrain train --checkpoint DIR");
  const std::string prompt = f.get_string("prompt", "\n", "text to continue (default: a newline)");
  const int64_t tokens = f.get_int("tokens", 500, 1, 100000000, "characters to generate");
  const double temperature = f.get_double("temperature", 0.8, 1e-6, 1e6, "softmax temperature (> 0)");
  const int64_t top_k = f.get_int("top-k", 0, 0, 1000000, "sample among the K most likely characters (0: all)");
  const int64_t seed = f.get_int("seed", 1, 0, INT64_MAX, "sampling seed (the same seed gives the same text)");
  if (f.help_requested()) {
    std::printf("%s", f.help_text("--checkpoint FILE [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K]").c_str());
    return 0;
  }
  f.finish();
  DT_CHECK(!path.empty(), InvalidArgument, "--checkpoint FILE is required (write one with dtrain train --model gpt:... --checkpoint FILE)");
  DT_CHECK(tokens >= 0, InvalidArgument, "--tokens must be >= 0");
  set_blas_threads(1);
  GptCheckpoint ck = load_gpt_checkpoint(path);
  GptStage model(ck.config, 0, ck.config.num_units());
  model.allocate(0);
  std::copy(ck.params.begin(), ck.params.end(), model.param_span().begin());
  std::vector<int32_t> ids;
  for (unsigned char ch : prompt) {
    int32_t id = -1;
    for (size_t v = 0; v < ck.vocab.size(); ++v)
      if (ck.vocab[v] == ch) id = static_cast<int32_t>(v);
    DT_CHECK(id >= 0, InvalidArgument, "--prompt: character '" << ch << "' (byte " << int(ch) << ") never occurs in the training text");
    ids.push_back(id);
  }
  std::vector<int32_t> out = sample_gpt(model, ids, tokens, static_cast<float>(temperature), static_cast<int>(top_k),
                                        static_cast<uint64_t>(seed));
  std::string text;
  for (int32_t id : out) text.push_back(static_cast<char>(ck.vocab[static_cast<size_t>(id)]));
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::printf("\n");
  return 0;
}

}  // namespace dtrain::cli
