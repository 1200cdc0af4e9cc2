// plan/model_spec.cc — the shapes the simulator prices (plan/simulator.h): ModelSpec from a
// model spec string, and a Layout's one-line description.
#include <sstream>

#include "base/error.h"
#include "nn/transformer.h"
#include "plan/closed_forms.h"
#include "plan/simulator.h"

namespace dtrain::plan {

double ModelSpec::params() const {
  double p = 0;
  for (const auto& u : units) p += u.params;
  return p;
}

std::string gpt_block_spec(int64_t heads, int64_t width, int64_t context) {
  return "gpt:layers=1,heads=" + std::to_string(heads) + ",width=" + std::to_string(width) +
         ",context=" + std::to_string(context);
}

// The MLP: one unit per layer (x W^T + b, then ReLU except the last); it keeps its input and
// its pre-activation for backward. The GPT: embedding, L blocks, head, each counted from the
// shapes in nn/transformer.h (a block: qkv 3h^2, proj h^2, fc 4h^2, proj 4h^2 MACs per token,
// plus QK^T and AV, s*h MACs each per token).
ModelSpec ModelSpec::parse(const std::string& spec) {
  ModelSpec m;
  m.spec = spec;
  m.unit_spec = spec;  // the MLP's; the GPT's below
  if (spec.rfind("gpt", 0) == 0) {
    GptConfig g = GptConfig::parse(spec, 65);
    m.gpt = true;
    m.heads = g.heads, m.width = g.width, m.context = g.context, m.layers = g.layers;
    m.unit_spec = gpt_block_spec(g.heads, g.width, g.context);
    double s = g.context, h = g.width, V = g.vocab;
    m.units.push_back({"embedding", "gpt_embedding", (V + s) * h, 0, 0, s * h, false});
    for (int64_t l = 0; l < g.layers; ++l)
      m.units.push_back({"block" + std::to_string(l), "gpt_block", 12 * h * h + 13 * h, 24 * s * h * h + 4 * s * s * h,
                         block_activation_elems(g.context, 1, g.width, g.heads, 1, false), s * h, true,
                         static_cast<double>(g.heads) * s * s});
    m.units.push_back({"head", "gpt_head", V * h + 2 * h, 2 * s * h * V, 2 * s * h + 2 * s * V, 0, false});
    return m;
  }
  DT_CHECK(spec.rfind("mlp:", 0) == 0, InvalidArgument,
           "--model '" << spec << "': the planner knows mlp:D0-D1-...-Dk and gpt:layers=..,heads=..,width=..,context=..");
  std::vector<double> dims;
  std::stringstream ss(spec.substr(4));
  std::string tok;
  while (std::getline(ss, tok, '-')) {
    char* end = nullptr;
    double d = std::strtod(tok.c_str(), &end);
    DT_CHECK(!tok.empty() && *end == 0 && d >= 1, InvalidArgument, "--model '" << spec << "': '" << tok << "' is not a layer width");
    dims.push_back(d);
  }
  DT_CHECK(dims.size() >= 2, InvalidArgument, "--model '" << spec << "' needs at least two widths (mlp:784-10)");
  for (size_t i = 0; i + 1 < dims.size(); ++i)
    m.units.push_back({"fc" + std::to_string(i), "mlp_layer", dims[i] * dims[i + 1] + dims[i + 1], 2 * dims[i] * dims[i + 1],
                       dims[i] + dims[i + 1], dims[i + 1], false});
  return m;
}

std::string Layout::describe() const {
  std::ostringstream o;
  o << strategy << " dp" << dp << " tp" << tp << " pp" << pp;
  if (zero) o << " zero" << zero;
  if (pp > 1) o << " " << schedule << (virtual_stages > 1 ? "x" + std::to_string(virtual_stages) : "") << " m" << micro;
  else if (micro > 1) o << " m" << micro;
  if (recompute) o << " recompute";
  if (dp > 1 && strategy == "ddp" && bucket_mb > 0) o << " bucket" << bucket_mb << "M";
  if (dp > 1 && strategy == "ddp" && shared_params >= 0) o << (shared_params ? " shared-params" : " own-params");
  if (dp > 1 && strategy == "ddp" && batch_share_max > 0) o << " split-max" << batch_share_max;
  else if (dp > 1 && strategy == "ddp" && batch_split >= 0) o << (batch_split ? " split-measured" : " split-even");
  return o.str();
}

}  // namespace dtrain::plan
