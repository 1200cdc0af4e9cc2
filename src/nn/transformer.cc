// nn/transformer.cc — the GPT units (embedding, block, head) and stages made of them.
//
// Shapes below: N = batch * seq tokens, W = width, Wl = W / tp (this rank's share of the
// attention width), Fl = 4W / tp, V = vocab.
#include "nn/transformer.h"

#include <cmath>
#include <sstream>

#include "autograd/attention.h"
#include "autograd/loss.h"
#include "base/error.h"
#include "tensor/random.h"

namespace dtrain {

std::string GptConfig::spec() const {
  std::ostringstream os;
  os << "gpt:layers=" << layers << ",heads=" << heads << ",width=" << width << ",context=" << context;
  return os.str();
}

GptConfig GptConfig::parse(const std::string& spec, int64_t vocab) {
  GptConfig c;
  c.vocab = vocab;
  std::string body = spec;
  if (body.rfind("gpt", 0) == 0) body = body.substr(3);
  if (!body.empty() && body[0] == ':') body = body.substr(1);
  std::stringstream ss(body);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    auto eq = item.find('=');
    DT_CHECK(eq != std::string::npos, InvalidArgument,
             "--model " << spec << ": '" << item << "' should be key=value (layers, heads, width, context)");
    std::string key = item.substr(0, eq), val = item.substr(eq + 1);
    int64_t v = 0;
    try {
      size_t used = 0;
      v = std::stoll(val, &used);
      DT_CHECK(used == val.size(), InvalidArgument, "");
    } catch (...) {
      DT_THROW(InvalidArgument, "--model " << spec << ": " << key << "=" << val << " is not an integer");
    }
    DT_CHECK(v > 0, InvalidArgument, "--model " << spec << ": " << key << " must be positive");
    if (key == "layers") c.layers = v;
    else if (key == "heads") c.heads = v;
    else if (key == "width") c.width = v;
    else if (key == "context") c.context = v;
    else DT_THROW(InvalidArgument, "--model " << spec << ": unknown key '" << key << "' (layers, heads, width, context)");
  }
  DT_CHECK(c.width % c.heads == 0, InvalidArgument,
           "--model " << spec << ": width " << c.width << " is not divisible by heads " << c.heads);
  DT_CHECK(vocab > 0, InvalidArgument, "GPT vocabulary must be non-empty");
  return c;
}

TpSplit tp_split(const std::string& name) {
  auto ends = [&](const char* s) {
    std::string t(s);
    return name.size() >= t.size() && name.compare(name.size() - t.size(), t.size(), t) == 0;
  };
  if (ends("attn.qkv.weight") || ends("attn.qkv.bias")) return TpSplit::kRows3;
  if (ends("mlp.fc.weight") || ends("mlp.fc.bias")) return TpSplit::kRows;
  if (ends("attn.proj.weight") || ends("mlp.proj.weight")) return TpSplit::kCols;
  return TpSplit::kReplicated;
}

Var GptUnit::forward(Graph&, const Var&) {
  DT_THROW(InvalidArgument, "GPT units run through GptStage::forward_stage");
}

namespace {

Init normal(float std) { return Init{InitKind::kNormal, 1, 1, std}; }
const Init kZero{InitKind::kZeros, 1, 1, 1.0f};
const Init kOne{InitKind::kOnes, 1, 1, 1.0f};

// tokens (N) -> wte[tokens] + wpe[t]  (N, W)
class Embed : public GptUnit {
 public:
  explicit Embed(const GptConfig& c)
      : wte_(add_param("wte", {c.vocab, c.width}, normal(0.02f))), wpe_(add_param("wpe", {c.context, c.width}, normal(0.02f))) {}
  Var run(Graph& g, std::span<const int32_t> tokens, int64_t batch, int64_t seq) {
    DT_CHECK(static_cast<int64_t>(tokens.size()) == batch * seq, InvalidArgument,
             "GPT embedding: " << tokens.size() << " tokens for batch " << batch << " x seq " << seq);
    DT_CHECK(seq <= wpe_.shape[0], InvalidArgument, "GPT: sequence " << seq << " exceeds the context " << wpe_.shape[0]);
    std::vector<int32_t> pos(tokens.size());
    for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int32_t>(static_cast<int64_t>(i) % seq);
    return add(embedding(pv(g, wte_), tokens), embedding(pv(g, wpe_), pos));
  }

 private:
  Parameter& wte_;
  Parameter& wpe_;
};

class LayerNormUnit : public GptUnit {
 public:
  explicit LayerNormUnit(int64_t w) : gamma_(add_param("weight", {w}, kOne)), beta_(add_param("bias", {w}, kZero)) {}
  Var run(Graph& g, const Var& x) { return layernorm(x, pv(g, gamma_), pv(g, beta_), 1e-5f); }

 private:
  Parameter& gamma_;
  Parameter& beta_;
};

// x (N, W) -> x + attention and MLP, with this rank's 1/tp of the heads and MLP columns.
class Block : public GptUnit {
 public:
  Block(const GptConfig& c, int tp)
      : heads_(c.heads / tp),
        ln1_(c.width),
        ln2_(c.width),
        qkv_w_(add_param("attn.qkv.weight", {3 * c.width / tp, c.width}, normal(0.02f))),
        qkv_b_(add_param("attn.qkv.bias", {3 * c.width / tp}, kZero)),
        proj_w_(add_param("attn.proj.weight", {c.width, c.width / tp}, normal(0.02f / std::sqrt(2.0f * c.layers)))),
        proj_b_(add_param("attn.proj.bias", {c.width}, kZero)),
        fc_w_(add_param("mlp.fc.weight", {4 * c.width / tp, c.width}, normal(0.02f))),
        fc_b_(add_param("mlp.fc.bias", {4 * c.width / tp}, kZero)),
        fc2_w_(add_param("mlp.proj.weight", {c.width, 4 * c.width / tp}, normal(0.02f / std::sqrt(2.0f * c.layers)))),
        fc2_b_(add_param("mlp.proj.bias", {c.width}, kZero)) {
    add_child("ln1", &ln1_);
    add_child("ln2", &ln2_);
  }
  void set_mode(GradMode m) { grad_mode = ln1_.grad_mode = ln2_.grad_mode = m; }

  Var run(Graph& g, const Var& x, int64_t batch, int64_t seq, TensorParallelHooks* hooks) {
    auto enter = [&](const Var& v) { return hooks ? hooks->enter(v) : v; };
    auto exit = [&](const Var& v) { return hooks ? hooks->exit(v) : v; };
    Var h = enter(ln1_.run(g, x));                                     // (N, W)
    Var qkv = linear(h, pv(g, qkv_w_), pv(g, qkv_b_));                 // (N, 3 Wl)
    Var att = causal_attention(qkv, batch, seq, heads_);               // (N, Wl)
    Var a = exit(linear(att, pv(g, proj_w_), Var()));                  // (N, W), summed over ranks
    Var x1 = add(x, bias_add(a, pv(g, proj_b_)));
    Var m = enter(ln2_.run(g, x1));                                    // (N, W)
    Var f = linear(m, pv(g, fc_w_), pv(g, fc_b_), Activation::kGelu);  // (N, Fl)
    Var p = exit(linear(f, pv(g, fc2_w_), Var()));                     // (N, W)
    return add(x1, bias_add(p, pv(g, fc2_b_)));
  }

 private:
  int64_t heads_;
  LayerNormUnit ln1_, ln2_;
  Parameter &qkv_w_, &qkv_b_, &proj_w_, &proj_b_, &fc_w_, &fc_b_, &fc2_w_, &fc2_b_;
};

// x (N, W) -> loss over targets, or logits (N, V).
class Head : public GptUnit {
 public:
  explicit Head(const GptConfig& c) : ln_(c.width), lm_(add_param("lm_head.weight", {c.vocab, c.width}, normal(0.02f))) {
    add_child("ln_f", &ln_);
  }
  void set_mode(GradMode m) { grad_mode = ln_.grad_mode = m; }
  Var run(Graph& g, const Var& x, std::span<const int32_t> targets) {
    Var logits = linear(ln_.run(g, x), pv(g, lm_), Var());
    return targets.empty() ? logits : cross_entropy(logits, targets);
  }

 private:
  LayerNormUnit ln_;
  Parameter& lm_;
};

uint64_t name_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

}  // namespace

GptStage::GptStage(const GptConfig& config, int unit_begin, int unit_end, int tp_size)
    : config_(config), begin_(unit_begin), end_(unit_end), tp_(tp_size) {
  DT_CHECK(0 <= begin_ && begin_ < end_ && end_ <= config.num_units(), InvalidArgument,
           "GPT stage [" << begin_ << ", " << end_ << ") is not inside the " << config.num_units() << " units");
  DT_CHECK(tp_ >= 1 && config.heads % tp_ == 0, InvalidArgument,
           "tensor parallel size " << tp_ << " must divide the " << config.heads << " heads");
  for (int u = begin_; u < end_; ++u) {
    if (u == 0) {
      units_.push_back(std::make_unique<Embed>(config));
      add_child("embed", units_.back().get());
    } else if (u == config.num_units() - 1) {
      units_.push_back(std::make_unique<Head>(config));
      add_child("head", units_.back().get());
    } else {
      units_.push_back(std::make_unique<Block>(config, tp_));
      add_child("blocks." + std::to_string(u - 1), units_.back().get());
    }
  }
}

GptStage::~GptStage() = default;

int64_t GptStage::unit_numel(int unit) const {
  DT_CHECK(unit >= begin_ && unit < end_, InvalidArgument, "unit " << unit << " is not in stage [" << begin_ << ", " << end_ << ")");
  return units_[static_cast<size_t>(unit - begin_)]->num_params();
}

int64_t GptStage::unit_offset(int unit) const {
  int64_t off = 0;
  for (int u = begin_; u < unit; ++u) off += unit_numel(u);
  return off;
}

void GptStage::set_grad_mode(GradMode mode) {
  for (auto& u : units_) {
    u->grad_mode = mode;
    if (auto* b = dynamic_cast<Block*>(u.get())) b->set_mode(mode);
    if (auto* h = dynamic_cast<Head*>(u.get())) h->set_mode(mode);
  }
}

void GptStage::init_gpt(uint64_t seed) {
  DT_CHECK(bound(), InvalidArgument, "init_gpt: allocate() or bind() the stage first");
  for (Parameter* p : parameters()) init_fill(p->init, p->value.span(), derive_seed(seed, name_hash(p->name)));
}

Var GptStage::forward_stage(Graph& g, const Var& x, std::span<const int32_t> tokens, std::span<const int32_t> targets,
                            int64_t batch, int64_t seq, TensorParallelHooks* hooks) {
  return forward_units(g, x, tokens, targets, batch, seq, hooks, begin_, end_);
}

Var GptStage::forward_units(Graph& g, const Var& x, std::span<const int32_t> tokens, std::span<const int32_t> targets,
                            int64_t batch, int64_t seq, TensorParallelHooks* hooks, int first, int last) {
  DT_CHECK(begin_ <= first && first < last && last <= end_, InvalidArgument,
           "GPT stage of units [" << begin_ << ", " << end_ << "): cannot run units [" << first << ", " << last << ")");
  Var h = x;
  for (int u = first; u < last; ++u) {
    GptUnit* unit = units_[static_cast<size_t>(u - begin_)].get();
    if (u == 0) {
      h = static_cast<Embed*>(unit)->run(g, tokens, batch, seq);
    } else if (u == config_.num_units() - 1) {
      DT_CHECK(h.defined(), InvalidArgument, "GPT head stage needs an input activation");
      h = static_cast<Head*>(unit)->run(g, h, targets);
    } else {
      DT_CHECK(h.defined(), InvalidArgument, "GPT block stage needs an input activation");
      DT_CHECK(h.value().ndim() == 2 && h.value().dim(0) == batch * seq && h.value().dim(1) == config_.width,
               InvalidArgument,
               "GPT block: input " << shape_str(h.value().shape()) << " should be [" << batch * seq << ", " << config_.width << "]");
      h = static_cast<Block*>(unit)->run(g, h, batch, seq, hooks);
    }
  }
  return h;
}

Var GptStage::forward(Graph& graph, const Var& x) {
  DT_CHECK(!has_embedding(), InvalidArgument, "GptStage::forward(x) is for stages without the embedding; use forward_stage");
  DT_CHECK(batch_ > 0 && seq_ > 0, InvalidArgument, "GptStage::forward(x): call set_training_batch(batch, seq) first");
  return forward_stage(graph, x, {}, {}, batch_, seq_);
}

int64_t gpt_num_params(const GptConfig& config) {
  GptStage s(config, 0, config.num_units());
  return s.num_params();
}

}  // namespace dtrain
