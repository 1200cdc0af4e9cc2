// nn/transformer_sample.cc — GPT checkpoint file and autoregressive sampling.
#include "nn/transformer_sample.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "tensor/random.h"

namespace dtrain {

void save_gpt_checkpoint(const std::string& path, const GptCheckpoint& c) {
  DT_CHECK(static_cast<int64_t>(c.params.size()) == gpt_num_params(c.config), InvalidArgument,
           "save_gpt_checkpoint: " << c.params.size() << " parameters for " << c.config.spec());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    DT_CHECK(out.good(), IoError, "cannot write checkpoint " << tmp);
    out << "dtrain-gpt 1\n" << c.config.spec() << "\nvocab " << c.vocab.size() << " ";
    out.write(reinterpret_cast<const char*>(c.vocab.data()), static_cast<std::streamsize>(c.vocab.size()));
    out << "\nstep " << c.step << " val " << c.val_loss << " params " << c.params.size() << "\n";
    out.write(reinterpret_cast<const char*>(c.params.data()), static_cast<std::streamsize>(c.params.size() * sizeof(float)));
    out.flush();
    DT_CHECK(out.good(), IoError, "writing checkpoint " << tmp << " failed (disk full?)");
  }
  DT_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, IoError, "cannot rename " << tmp << " to " << path);
}

GptCheckpoint load_gpt_checkpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DT_CHECK(in.good(), IoError, "cannot open checkpoint " << path);
  std::string magic, spec, word;
  std::getline(in, magic);
  DT_CHECK(magic == "dtrain-gpt 1", Corrupt, path << " is not a dtrain GPT checkpoint (first line '" << magic << "')");
  std::getline(in, spec);
  size_t nv = 0;
  in >> word >> nv;
  DT_CHECK(in.good() && word == "vocab" && nv > 0 && nv <= 256, Corrupt, path << ": bad vocabulary line");
  in.get();  // the space
  GptCheckpoint c;
  c.vocab.resize(nv);
  in.read(reinterpret_cast<char*>(c.vocab.data()), static_cast<std::streamsize>(nv));
  size_t np = 0;
  std::string s1, s2, s3;
  in >> s1 >> c.step >> s2 >> c.val_loss >> s3 >> np;
  DT_CHECK(in.good() && s1 == "step" && s2 == "val" && s3 == "params", Corrupt, path << ": bad header line");
  in.get();  // newline
  c.config = GptConfig::parse(spec, static_cast<int64_t>(nv));
  DT_CHECK(static_cast<int64_t>(np) == gpt_num_params(c.config), Corrupt,
           path << ": " << np << " parameters, but " << spec << " has " << gpt_num_params(c.config));
  c.params.resize(np);
  in.read(reinterpret_cast<char*>(c.params.data()), static_cast<std::streamsize>(np * sizeof(float)));
  DT_CHECK(static_cast<size_t>(in.gcount()) == np * sizeof(float), Corrupt, path << " is truncated");
  return c;
}

std::vector<int32_t> sample_gpt(GptStage& model, std::vector<int32_t> ids, int64_t n, float temperature, int top_k,
                                uint64_t seed) {
  DT_CHECK(temperature > 0, InvalidArgument, "--temperature must be > 0, got " << temperature);
  DT_CHECK(!ids.empty(), InvalidArgument, "sampling needs a prompt of at least one character");
  const GptConfig& c = model.config();
  Rng rng(seed);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = std::min<int64_t>(c.context, static_cast<int64_t>(ids.size()));
    std::vector<int32_t> window(ids.end() - len, ids.end());
    Graph g(nullptr, false);
    Tensor logits = model.forward_stage(g, Var(), window, {}, 1, len).value();  // (len, V)
    const float* last = logits.data() + (len - 1) * c.vocab;
    std::vector<double> p(static_cast<size_t>(c.vocab));
    for (int64_t v = 0; v < c.vocab; ++v) p[static_cast<size_t>(v)] = last[v] / temperature;
    if (top_k > 0 && top_k < c.vocab) {
      std::vector<double> sorted = p;
      std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(), std::greater<double>());
      const double cut = sorted[static_cast<size_t>(top_k - 1)];
      for (double& x : p)
        if (x < cut) x = -1e300;
    }
    const double mx = *std::max_element(p.begin(), p.end());
    double sum = 0;
    for (double& x : p) sum += (x = x <= -1e299 ? 0.0 : std::exp(x - mx));
    double u = rng.uniform() * sum;
    int32_t pick = static_cast<int32_t>(c.vocab - 1);
    for (int64_t v = 0; v < c.vocab; ++v) {
      u -= p[static_cast<size_t>(v)];
      if (u < 0) {
        pick = static_cast<int32_t>(v);
        break;
      }
    }
    ids.push_back(pick);
  }
  return ids;
}

}  // namespace dtrain
