#include "plan/calibrate_units.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <numeric>
#include <optional>
#include <set>
#include <utility>

#include "autograd/graph.h"
#include "autograd/ops.h"
#include "base/error.h"
#include "base/heap_stats.h"
#include "nn/mlp.h"
#include "nn/transformer.h"
#include "plan/closed_forms.h"
#include "plan/simulator.h"
#include "tensor/blas.h"
#include "tensor/denormals.h"

namespace dtrain::plan {
namespace {

constexpr int kStack = 4;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// One model's units, parsed once per spec.
const Unit& unit_of(const std::string& spec, int index, ModelSpec* cache) {
  if (cache->spec != spec) *cache = ModelSpec::parse(spec);
  DT_CHECK(index >= 0 && index < static_cast<int>(cache->units.size()), InvalidArgument,
           "unit " << index << " of " << spec << " does not exist");
  return cache->units[static_cast<size_t>(index)];
}

// A point's work: items x the unit's work; for "gpt_layernorm" (no unit of its own) the
// elements it normalises, items x context x width.
double point_work(const UnitPoint& p, ModelSpec* cache) {
  if (p.kind == "gpt_layernorm") {
    if (cache->spec != p.spec) *cache = ModelSpec::parse(p.spec);
    return static_cast<double>(p.items) * static_cast<double>(cache->context * cache->width);
  }
  return static_cast<double>(p.items) * unit_work(unit_of(p.spec, p.unit, cache));
}

// The points of every distinct unit kind of `spec` at these item counts; a GPT's also time
// one layernorm over a block's output ("gpt_layernorm"): tensor parallelism splits a block's
// GEMMs over its ranks but every rank normalises the whole width (simulator.cc).
std::vector<UnitPoint> points_of(const std::string& spec, const std::vector<int64_t>& items) {
  ModelSpec m = ModelSpec::parse(spec);
  std::vector<UnitPoint> out;
  if (m.gpt)
    for (int64_t n : items) out.push_back({"gpt_layernorm", spec, -1, n, static_cast<double>(n * m.context * m.width), 0, 0});
  for (size_t u = 0; u < m.units.size(); ++u) {
    const Unit& x = m.units[u];
    // One GPT block stands for all (they are identical); every MLP layer has its own shape.
    if (m.gpt && x.block && u != 1) continue;
    for (int64_t n : items) out.push_back({x.kind, spec, static_cast<int>(u), n, n * unit_work(x), 0, 0});
    // ... and is also timed as ZeRO-3 runs it (kZero3Block).
    if (m.gpt && x.block)
      for (int64_t n : items) out.push_back({kZero3Block, spec, static_cast<int>(u), n, n * unit_work(x), 0, 0});
  }
  return out;
}

// Forward and backward seconds: the MEDIAN pass (training pays the typical pass, not the
// luckiest one: on a shared machine the best pass is far below what a run averages).
// fixed > 0: exactly that many passes after the warm-up (a fixed amount of work).
// Memory: the heap the graph keeps after forward (the activations backward needs), and the
// heap's high-water mark over forward + backward, both above what was live before forward
// (base/heap_stats.h; the last pass's, they do not vary).
// The upper median of a non-empty list (reorders it).
double median_of(std::vector<double>& v) {
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

template <class Fwd, class Bwd>
UnitPass time_pass(double seconds, int fixed, const PassHook& on_pass, Fwd&& fwd, Bwd&& bwd) {
  std::vector<double> fs, bs;
  double act = 0, peak = 0;
  const double start = now();
  for (int reps = 0; fixed > 0 ? reps <= fixed : reps < 10000 && (reps < 6 || now() - start < seconds); ++reps) {
    Graph g;
    heap_reset_peak();
    const int64_t base = heap_stats().live;
    double t0 = now();
    Var out = fwd(g);
    double t1 = now();
    act = static_cast<double>(heap_stats().live - base);
    bwd(g, out);
    double t2 = now();
    peak = static_cast<double>(heap_stats().peak - base);
    if (reps == 0) continue;  // warm-up: first touch of the buffers
    if (on_pass) on_pass(t0, t2);
    fs.push_back(t1 - t0);
    bs.push_back(t2 - t1);
  }
  return {median_of(fs), median_of(bs), act, peak};
}

// A block's input and output gradient for `tok` tokens of `width`: values that vary along a
// row (a constant row would make LayerNorm's variance zero).
std::pair<Tensor, Tensor> varying_inputs(int64_t tok, int64_t width) {
  Tensor x = Tensor::empty({tok, width}), seed = Tensor::empty({tok, width});
  for (int64_t i = 0; i < x.numel(); ++i) {
    x.data()[i] = 0.5f * std::sin(0.37f * static_cast<float>(i));
    seed.data()[i] = 1e-3f * std::cos(0.11f * static_cast<float>(i));
  }
  return {std::move(x), std::move(seed)};
}

}  // namespace

UnitPass time_unit(const UnitPoint& p, double seconds, int fixed, const PassHook& on_pass) {
  FlushDenormals ftz;  // as the executors run
  if (p.kind == "mlp_layer") {
    std::vector<int64_t> dims = MLP::parse_spec(p.spec.substr(4));
    int64_t in = dims[static_cast<size_t>(p.unit)], out = dims[static_cast<size_t>(p.unit) + 1];
    bool last = p.unit + 2 == static_cast<int>(dims.size());
    Linear layer(in, out, true, last ? Activation::kNone : Activation::kRelu);
    layer.allocate(1);
    Tensor x = Tensor::full({p.items, in}, 0.5f), seed = Tensor::full({p.items, out}, 1.0f / p.items);
    return time_pass(
        seconds, fixed, on_pass, [&](Graph& g) { return layer.forward(g, g.input(x)); },
        [&](Graph& g, const Var& y) { g.backward(y, seed); });
  }
  GptConfig c = GptConfig::parse(p.spec, 65);
  if (p.kind == "gpt_layernorm") {
    const int64_t tok = p.items * c.context;
    auto [x, seed] = varying_inputs(tok, c.width);
    Tensor gamma = Tensor::full({c.width}, 1.0f), beta = Tensor::full({c.width}, 0.0f);
    return time_pass(
        seconds, fixed, on_pass, [&](Graph& g) { return layernorm(g.leaf(x), g.leaf(gamma), g.leaf(beta)); },
        [&](Graph& g, const Var& y) { g.backward(y, seed); });
  }
  if (p.kind == kZero3Block) {
    // One block alone, as parallel/zero3.cc runs it: a forward that records nothing, then
    // (its backward) the forward again with recording and the backward at once, on the
    // activations the re-run just wrote.
    c.layers = std::max<int64_t>(c.layers, 1);
    GptStage one(c, p.unit, p.unit + 1);
    one.allocate(1);
    one.init_gpt(1);
    const int64_t tok = p.items * c.context;
    auto [x, seed] = varying_inputs(tok, c.width);
    return time_pass(
        seconds, fixed, on_pass,
        [&](Graph&) {
          Graph none(nullptr, false);
          one.forward_stage(none, none.input(x), {}, {}, p.items, c.context);
          return Var();
        },
        [&](Graph& g, const Var&) { g.backward(one.forward_stage(g, g.leaf(x), {}, {}, p.items, c.context), seed); });
  }
  // A block is timed inside a stack of kStack blocks and charged 1/kStack of it: the
  // activations of several blocks (not one block's, hot in cache) are what training touches.
  const int count = p.kind == "gpt_block" ? kStack : 1;
  if (p.kind == "gpt_block") c.layers = std::max<int64_t>(c.layers, kStack);
  GptStage stage(c, p.unit, p.unit + count);
  stage.allocate(1);
  stage.init_gpt(1);
  const int64_t tok = p.items * c.context;
  std::vector<int32_t> ids(static_cast<size_t>(tok));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7) % static_cast<size_t>(c.vocab));
  auto [x, seed] = varying_inputs(tok, c.width);
  if (p.kind == "gpt_embedding")
    return time_pass(
        seconds, fixed, on_pass, [&](Graph& g) { return stage.forward_stage(g, Var(), ids, {}, p.items, c.context); },
        [&](Graph& g, const Var& y) { g.backward(y, seed); });
  if (p.kind == "gpt_head")
    return time_pass(
        seconds, fixed, on_pass,
        [&](Graph& g) { return stage.forward_stage(g, g.leaf(x), {}, ids, p.items, c.context); },
        [&](Graph& g, const Var& y) { g.backward(y); });
  UnitPass r = time_pass(
      seconds, fixed, on_pass, [&](Graph& g) { return stage.forward_stage(g, g.leaf(x), {}, {}, p.items, c.context); },
      [&](Graph& g, const Var& y) { g.backward(y, seed); });
  return {r.fwd_s / count, r.bwd_s / count, r.act_b / count, r.peak_b / count};
}

namespace {

// signed_ok: the "mlp_step" kind, the MLP step less its layers' timed points, which is signed
// by design (calibrate_compute.h: a whole step may run faster than its layers timed apart).
// Refusing it refused the file `bench calibrate` had just written, and every prediction
// from it failed ("fit coefficients must be >= 0"): seen on the EPYC VM in a slow spell,
// whose step line came out at -59.8 us.
UnitFit fit_of(const nlohmann::json& j, const std::string& where, bool signed_ok) {
  DT_CHECK(j.is_object() && j.contains("fixed_us") && j["fixed_us"].is_number() && j.contains("ns_per_kwork") &&
               j["ns_per_kwork"].is_number(),
           InvalidArgument, where << ": a fit is {\"fixed_us\": number, \"ns_per_kwork\": number}");
  UnitFit f{j["fixed_us"].get<double>() * 1e-6, j["ns_per_kwork"].get<double>() * 1e-12, 0};
  if (j.contains("ns_per_kparam")) {  // absent in files before it: no per-parameter term
    DT_CHECK(j["ns_per_kparam"].is_number(), InvalidArgument, where << ".ns_per_kparam must be a number");
    f.s_per_param = j["ns_per_kparam"].get<double>() * 1e-12;
  }
  DT_CHECK(signed_ok || (f.fixed_s >= 0 && f.s_per_work >= 0 && f.s_per_param >= 0), InvalidArgument,
           where << ": fit coefficients must be >= 0");
  return f;
}

}  // namespace

namespace {

// Least squares of t on the columns `use` marks (0: the constant, 1: work, 2: params), by the
// normal equations and Gaussian elimination; false when they are singular.
bool solve_columns(const std::vector<PlanePoint>& pts, const std::array<bool, 3>& use, double shift,
                   std::array<double, 3>& coef) {
  std::vector<int> cols;
  for (int i = 0; i < 3; ++i)
    if (use[static_cast<size_t>(i)]) cols.push_back(i);
  const size_t k = cols.size();
  auto x = [](const PlanePoint& p, int i) { return i == 0 ? 1.0 : i == 1 ? p.work : p.params; };
  std::array<std::array<double, 4>, 3> a{};  // k x (k + 1), augmented
  for (const auto& p : pts)
    for (size_t r = 0; r < k; ++r) {
      for (size_t c = 0; c < k; ++c) a[r][c] += x(p, cols[r]) * x(p, cols[c]);
      a[r][k] += x(p, cols[r]) * (p.t - shift);
    }
  for (size_t c = 0; c < k; ++c) {
    size_t piv = c;
    for (size_t r = c + 1; r < k; ++r)
      if (std::abs(a[r][c]) > std::abs(a[piv][c])) piv = r;
    std::swap(a[c], a[piv]);
    double scale = 0;
    for (size_t r = 0; r < k; ++r) scale = std::max(scale, std::abs(a[r][c]));
    if (std::abs(a[c][c]) <= 1e-12 * scale || a[c][c] == 0) return false;
    for (size_t r = 0; r < k; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (size_t q = c; q <= k; ++q) a[r][q] -= f * a[c][q];
    }
  }
  coef = {0, 0, 0};
  for (size_t r = 0; r < k; ++r) coef[static_cast<size_t>(cols[r])] = a[r][k] / a[r][r];
  return true;
}

// The best non-negative fit over the subsets of the columns `allowed` allows, with the
// constant fixed at `fixed` when fixed >= 0 (then column 0 is not fitted).
UnitFit best_subset(const std::vector<PlanePoint>& pts, const std::array<bool, 3>& allowed, double fixed) {
  UnitFit best{std::max(0.0, fixed), 0, 0};
  double best_sse = -1;
  for (int mask = 1; mask < 8; ++mask) {
    std::array<bool, 3> use{(mask & 1) != 0, (mask & 2) != 0, (mask & 4) != 0};
    bool ok = true;
    for (size_t i = 0; i < 3; ++i) ok = ok && (!use[i] || allowed[i]);
    if (!ok || (fixed >= 0 && use[0])) continue;
    std::array<double, 3> c{};
    if (!solve_columns(pts, use, fixed >= 0 ? fixed : 0, c) || c[0] < 0 || c[1] < 0 || c[2] < 0) continue;
    UnitFit f{fixed >= 0 ? fixed : c[0], c[1], c[2]};
    double sse = 0;
    for (const auto& p : pts) sse += (f.at(p.work, p.params) - p.t) * (f.at(p.work, p.params) - p.t);
    if (best_sse < 0 || sse < best_sse) best = f, best_sse = sse;
  }
  if (best_sse < 0 && fixed < 0) {  // nothing non-negative: the mean as a constant
    double sum = 0;
    for (const auto& p : pts) sum += p.t;
    best = {sum / static_cast<double>(pts.size()), 0, 0};
  }
  return best;
}

}  // namespace

// The best non-negative least-squares fit over the subsets of {fixed, work, params} (params
// only where the points have more than one parameter count). On a line this is the rule a
// line fit would state case by case: a negative slope gives the mean as a constant, a
// negative intercept the fit through the origin (which then always has the lower error), so
// a fit never predicts a negative time when it extrapolates. The intercept is then capped at
// a share of the least-work point's time and the rest refitted for it, where at least two
// works differ.
UnitFit fit_plane(const std::vector<PlanePoint>& pts, double max_fixed_share) {
  DT_CHECK(!pts.empty(), InvalidArgument, "a fit needs at least one point");
  bool params_vary = false, works_vary = false;
  for (const auto& p : pts) {
    params_vary = params_vary || p.params != pts.front().params;
    works_vary = works_vary || p.work != pts.front().work;
  }
  UnitFit f = best_subset(pts, {true, true, params_vary}, -1);
  const auto smallest = *std::min_element(pts.begin(), pts.end(), [](const PlanePoint& a, const PlanePoint& b) {
    return a.work < b.work || (a.work == b.work && a.t < b.t);
  });
  const double cap = max_fixed_share * smallest.t;
  if (works_vary && smallest.work > 0 && f.fixed_s > cap) f = best_subset(pts, {false, true, params_vary}, cap);
  return f;
}

UnitFit fit_line(const std::vector<std::pair<double, double>>& xy, double max_fixed_share) {
  std::vector<PlanePoint> pts;
  for (auto [x, y] : xy) pts.push_back({x, 0, y});
  return fit_plane(pts, max_fixed_share);
}

namespace {

// A point's parameters: its unit's, or the whole model's for the step around the units.
double params_of(const UnitPoint& p, ModelSpec* cache) {
  if (p.kind == "mlp_step") return ModelSpec::parse(p.spec).params();
  if (p.kind == "gpt_layernorm") return 2.0 * static_cast<double>(ModelSpec::parse(p.spec).width);  // gamma, beta
  return unit_of(p.spec, p.unit, cache).params;
}

// The entries of the fits a point belongs to: its kind's, and, where a kind was timed on more
// than one model, that model's own ("kind@spec"): Cluster::unit_for prefers it for that
// model. (One plane over the 784-256-128-10 MLP and the 784-1024-1024-10 one fitted neither:
// the small one's rows +30..+80%, the large one's -19..-24%.)
class FitKeys {
 public:
  explicit FitKeys(const std::vector<UnitPoint>& points) {
    for (const auto& p : points) specs_of_[p.kind].insert(p.spec);
  }
  std::vector<std::string> operator()(const UnitPoint& p) const {
    std::vector<std::string> k{p.kind};
    if (specs_of_.at(p.kind).size() > 1) k.push_back(p.kind + "@" + p.spec);
    return k;
  }

 private:
  std::map<std::string, std::set<std::string>> specs_of_;
};

// Files every point under each fit it belongs to (UnitCost::timed), items increasing: the
// MLP's layers and step, and the GPT's embedding, block and head.
// - The MLP's layers change kernels with the rows (gemm_small.h up to 64-256, OpenBLAS above),
//   which no one plane follows.
// - The GPT's passes cost more per sequence at few sequences (a fixed cost a pass: the
//   6x128 block's forward read 1.03 ms a sequence at 2, 0.91 at 6, 0.85 at 12) and again at
//   24 (20 MB of activations leave the cache: 1.03). The fit, one line through the four
//   with its intercept >= 0, came out with no fixed cost, so a pipeline cost the same CPU
//   whatever its micro-batches, and the planner took the most micro-batches for their
//   smaller bubble. Measured (4 ranks on 2 cores, pp4 1f1b, batch 16, CPU a step from 36
//   against 12 steps): 199 ms at 2 micro-batches, 246 at 4 and 8, 268 at 16 (the wall
//   123, 147, 143, 157 ms), predicted 159, 148, 141, 137 from the fit and 140, 141, 150, 178
//   from the points. Re-ranking the five plan-quality sweeps' measured layouts with their
//   calibrations: the chosen one from +20.7 / +25.0 / +35.0% of the best measured to +4.9 /
//   +15.4 / +28.9% where the choice changed (2026-11-27, twenty-third session).
// - Not the ZeRO-3 block (kZero3Block): priced by its points, its rows read 7-8 points
//   further under in the two validations re-predicted (dv-x1, dv-x4); nor the layernorm,
//   which has no points of its own.
// (Before the twenty-third session the GPT's kinds kept the fit: priced by the 6x128 block's
// points, an earlier plan-quality sweep read 14-25% short at 8 ranks.)
void attach_timed(std::map<std::string, UnitCost>& fits, const std::vector<UnitPoint>& points) {
  const FitKeys keys(points);
  ModelSpec cache;
  for (const auto& p : points)
    if (p.kind != "gpt_layernorm" && p.kind != kZero3Block)
      for (const auto& key : keys(p))
        if (auto it = fits.find(key); it != fits.end())
          it->second.timed[{p.spec, params_of(p, &cache)}].push_back({static_cast<double>(p.items), p.fwd_s, p.bwd_s});
  // A pass over fewer items cannot cost more than one over more: a point above a later one
  // is noise, and the later one's time stands for it (on the 16-core host the MLP step's
  // residual read 485 us at 16 examples and 279 at 64, pricing every 16-example step +35%).
  for (auto& [kind, c] : fits)
    for (auto& [unit, ts] : c.timed) {
      std::sort(ts.begin(), ts.end(), [](const auto& a, const auto& b) { return a.items < b.items; });
      for (size_t i = ts.size(); i-- > 1;) {
        ts[i - 1].fwd_s = std::min(ts[i - 1].fwd_s, ts[i].fwd_s);
        ts[i - 1].bwd_s = std::min(ts[i - 1].bwd_s, ts[i].bwd_s);
      }
    }
}

}  // namespace

std::pair<double, double> UnitCost::pass(const std::string& spec, double params, double items, double work) const {
  const auto it = timed.find({spec, params});
  if (it == timed.end() || it->second.size() < 2 || items <= 0)
    return {fwd.at(work, params), bwd.at(work, params)};
  const auto& ts = it->second;
  // Below the first point: its segment to the second, extended, so a pass keeps the fixed
  // cost the two points show (a GPT block at 1 sequence, a pipeline's micro-batch of batch
  // 16 over 16); never below the first point scaled in proportion to the items.
  if (items <= ts.front().items) {
    const Timed& a = ts[0];
    const double r = items / a.items;
    // The next point with more items (a unit timed twice at one count has two points there).
    const auto b = std::find_if(ts.begin(), ts.end(), [&](const Timed& t) { return t.items > a.items; });
    if (b == ts.end()) return {a.fwd_s * r, a.bwd_s * r};
    const double x = (items - a.items) / (b->items - a.items);
    return {std::max(a.fwd_s * r, a.fwd_s + x * (b->fwd_s - a.fwd_s)),
            std::max(a.bwd_s * r, a.bwd_s + x * (b->bwd_s - a.bwd_s))};
  }
  // Beyond the last point: it, times the fit's ratio from its items to these.
  auto scaled = [&](const Timed& t) {
    const double w = work * t.items / items;
    auto ratio = [&](const UnitFit& f, double at_t) {
      const double a = f.at(w, params);
      return a > 0 && at_t > 0 ? at_t * f.at(work, params) / a : f.at(work, params);
    };
    return std::pair{ratio(fwd, t.fwd_s), ratio(bwd, t.bwd_s)};
  };
  if (items >= ts.back().items) return scaled(ts.back());
  size_t i = 1;
  while (ts[i].items < items) ++i;
  const Timed &a = ts[i - 1], &b = ts[i];
  const double x = (items - a.items) / (b.items - a.items);
  return {a.fwd_s + x * (b.fwd_s - a.fwd_s), a.bwd_s + x * (b.bwd_s - a.bwd_s)};
}

namespace {

// Least squares through the origin of y on two variables x1 and x2, from the sums of x1^2,
// x1 x2, x2^2, x1 y and x2 y: nullopt where the points hold x1 and x2 in (nearly) one
// proportion (one shape, or no x2 at all) or a slope comes out <= 0.
std::optional<std::pair<double, double>> two_slopes(double x11, double x12, double x22, double x1y, double x2y) {
  const auto ab = fit_two_through_origin(x11, x12, x22, x1y, x2y, 1e-4);
  if (!ab || ab->first <= 0 || ab->second <= 0) return std::nullopt;
  return ab;
}

}  // namespace

std::map<std::string, UnitCost> fit_units(const std::vector<UnitPoint>& points) {
  ModelSpec cache;
  const FitKeys keys(points);
  std::map<std::string, std::pair<std::vector<PlanePoint>, std::vector<PlanePoint>>> by;
  for (const auto& p : points) {
    const double P = params_of(p, &cache);
    for (const auto& key : keys(p)) {
      by[key].first.push_back({p.work, P, p.fwd_s});
      by[key].second.push_back({p.work, P, p.bwd_s});
    }
  }
  std::map<std::string, UnitCost> out;
  for (const auto& [kind, xy] : by) {
    out[kind].fwd = fit_plane(xy.first, kMaxFixedShare);
    out[kind].bwd = fit_plane(xy.second, kMaxFixedShare);
  }
  // Bytes per item: the least-squares slope through the origin (memory has no fixed part
  // worth keeping: the weights are counted apart).
  // Per item, and per element of the unit's memory basis (items x mem_elems); a block's also
  // per attention probability and per element of the rest where the points tell them apart.
  struct MemSums {
    double nn = 0, n_act = 0, n_peak = 0;  // x = items
    double ee = 0, e_act = 0, e_peak = 0;  // x = elements
    double dd = 0, ds = 0, ss = 0, d_act = 0, s_act = 0, d_peak = 0, s_peak = 0;  // (rest, probabilities)
  };
  std::map<std::string, MemSums> mem;
  for (const auto& p : points) {
    if (p.kind == "gpt_layernorm") continue;  // its memory is inside the block's
    const Unit& u = unit_of(p.spec, p.unit, &cache);
    const double n = static_cast<double>(p.items), e = n * mem_elems(u), sc = n * u.score_elems, d = e - sc;
    for (const auto& key : keys(p)) {
      auto& m = mem[key];
      m.nn += n * n, m.n_act += n * p.act_b, m.n_peak += n * p.peak_b;
      m.ee += e * e, m.e_act += e * p.act_b, m.e_peak += e * p.peak_b;
      m.dd += d * d, m.ds += d * sc, m.ss += sc * sc;
      m.d_act += d * p.act_b, m.s_act += sc * p.act_b, m.d_peak += d * p.peak_b, m.s_peak += sc * p.peak_b;
    }
  }
  for (auto& [kind, m] : mem) {
    UnitCost& c = out[kind];
    if (m.nn <= 0) continue;
    c.act_b_per_item = std::max(0.0, m.n_act / m.nn);
    c.peak_b_per_item = std::max(c.act_b_per_item, m.n_peak / m.nn);
    if (m.ee <= 0) continue;
    c.act_b_per_elem = std::max(0.0, m.e_act / m.ee);
    c.peak_b_per_elem = std::max(c.act_b_per_elem, m.e_peak / m.ee);
    const auto act = two_slopes(m.dd, m.ds, m.ss, m.d_act, m.s_act), peak = two_slopes(m.dd, m.ds, m.ss, m.d_peak, m.s_peak);
    // (The ZeRO-3 block keeps nothing between its passes: a high-water mark alone.)
    const bool keeps_nothing = m.e_act <= 0;
    if (!peak || (!act && !keeps_nothing)) continue;
    if (act) c.act_b_per_elem = act->first, c.act_b_per_score = act->second;
    c.peak_b_per_elem = std::max(c.act_b_per_elem, peak->first), c.peak_b_per_score = std::max(c.act_b_per_score, peak->second);
  }
  attach_timed(out, points);
  return out;
}

std::vector<UnitPoint> default_unit_points() {
  std::vector<UnitPoint> pts = points_of("mlp:784-256-128-10", kMlpItems);
  for (const char* mlp : {kWideMlp, kNarrowMlp})
    for (auto& p : points_of(mlp, kMlpItems)) pts.push_back(p);
  for (const char* g : {"gpt:layers=1,heads=4,width=64,context=64", "gpt:layers=1,heads=8,width=128,context=64",
                        "gpt:layers=1,heads=8,width=256,context=64"})
    for (auto& p : points_of(g, {2, 6, 12, 24})) pts.push_back(p);
  // Width 512 up to 12 sequences: a wider GPT is priced at the widest timed width's cost per
  // work (sim_costs.h untimed_gpt_rate), and per FLOP a block at 768 costs about 0.76x one at
  // 256 (fifty-third session); 24 sequences of it would add ~15 s to the calibration.
  for (auto& p : points_of("gpt:layers=1,heads=8,width=512,context=64", {2, 6, 12})) pts.push_back(p);
  // Context 256 at head dimensions 16 and 64, beside widths 128 and 256 at context 64: they
  // tell the attention's cost per probability (sim_costs.h untimed_gpt_rate) from the rest,
  // which grows as the context's square where the rest grows as the context. Priced at one
  // rate per work from context 64, blocks at 256 read 12-28% short, at 512 38% (fifty-fourth
  // session). Two to four sequences: 4 of width 256 at 256 cost as much as 24 at 64.
  for (const char* g : {"gpt:layers=1,heads=8,width=128,context=256", "gpt:layers=1,heads=4,width=256,context=256"})
    for (auto& p : points_of(g, {2, 4})) pts.push_back(p);
  return pts;
}

std::vector<UnitPoint> unit_points_for(const std::string& spec) {
  ModelSpec m = ModelSpec::parse(spec);
  return points_of(spec, m.gpt ? std::vector<int64_t>{2, 6, 12, 24} : kMlpItems);
}

// The points are timed in kMeasureRounds interleaved rounds (every point, then every point
// again), each point's time the median of its rounds' medians. Since the GPT's units are
// priced by their points (attach_timed), the points' shape across item counts is the model,
// and on this VM the speed changes mode within seconds: timed one after the other, a change
// between two item counts bent the shape (of twelve calibrations, three had the 6x128
// block's 12-sequence forward 19-26% cheaper a sequence than its 6-sequence one and one 24%
// dearer, where the rest read -1..+12%). Interleaved, a change hits every item count within
// a round.
constexpr int kMeasureRounds = 3;

void measure_units(std::vector<UnitPoint>& points, double seconds) {
  keep_heap_warm();
  set_blas_threads(1);
  const double per = seconds / std::max<size_t>(1, points.size()) / kMeasureRounds;
  ModelSpec cache;
  std::vector<std::vector<double>> fwd(points.size()), bwd(points.size());
  for (auto& p : points) p.work = point_work(p, &cache);
  for (int round = 0; round < kMeasureRounds; ++round)
    for (size_t i = 0; i < points.size(); ++i) {
      UnitPoint& p = points[i];
      const UnitPass r = time_unit(p, per, 0);
      fwd[i].push_back(r.fwd_s), bwd[i].push_back(r.bwd_s);
      p.act_b = r.act_b, p.peak_b = r.peak_b;  // the same every round
    }
  for (size_t i = 0; i < points.size(); ++i) points[i].fwd_s = median_of(fwd[i]), points[i].bwd_s = median_of(bwd[i]);
}

nlohmann::json units_json(const std::vector<UnitPoint>& points, const std::map<std::string, UnitCost>& fits) {
  nlohmann::json j = {{"fits", nlohmann::json::object()}, {"points", nlohmann::json::array()}};
  auto fj = [](const UnitFit& f) {
    return nlohmann::json{{"fixed_us", f.fixed_s * 1e6}, {"ns_per_kwork", f.s_per_work * 1e12}, {"ns_per_kparam", f.s_per_param * 1e12}};
  };
  for (const auto& [kind, c] : fits)
    j["fits"][kind] = {{"forward", fj(c.fwd)}, {"backward", fj(c.bwd)}, {"act_bytes_per_item", c.act_b_per_item},
                       {"peak_bytes_per_item", c.peak_b_per_item}, {"act_bytes_per_elem", c.act_b_per_elem},
                       {"peak_bytes_per_elem", c.peak_b_per_elem}, {"act_bytes_per_score", c.act_b_per_score},
                       {"peak_bytes_per_score", c.peak_b_per_score}};
  for (const auto& p : points)
    j["points"].push_back({{"kind", p.kind}, {"spec", p.spec}, {"unit", p.unit}, {"items", p.items}, {"work", p.work},
                           {"forward_us", p.fwd_s * 1e6}, {"backward_us", p.bwd_s * 1e6},
                           {"act_bytes", p.act_b}, {"peak_bytes", p.peak_b}});
  if (!points.empty()) return j;
  // No points given (a cluster written out, cluster_to_json): the timed points the fits carry,
  // so that the file read back prices the MLP as the cluster did. Each is under its kind's
  // entry (the "kind@spec" ones repeat it); its unit is the model's unit of that kind and size.
  for (const auto& [kind, c] : fits) {
    if (kind.find('@') != std::string::npos) continue;
    for (const auto& [key, ts] : c.timed) {
      const ModelSpec m = ModelSpec::parse(key.first);
      int unit = -1;
      for (size_t u = 0; u < m.units.size() && unit < 0; ++u)
        if (kind == "mlp_step" || (m.units[u].kind == kind && m.units[u].params == key.second)) unit = static_cast<int>(u);
      if (unit < 0) continue;
      const double per_item = kind == "mlp_step" ? mlp_step_work(m) : unit_work(m.units[static_cast<size_t>(unit)]);
      for (const auto& t : ts)
        j["points"].push_back({{"kind", kind}, {"spec", key.first}, {"unit", unit}, {"items", static_cast<int64_t>(t.items)},
                               {"work", t.items * per_item}, {"forward_us", t.fwd_s * 1e6}, {"backward_us", t.bwd_s * 1e6}});
    }
  }
  return j;
}

std::map<std::string, UnitCost> units_from_json(const nlohmann::json& j, const std::string& where) {
  DT_CHECK(j.is_object() && j.contains("fits") && j["fits"].is_object(), InvalidArgument,
           where << ": \"units\" must be an object with \"fits\" {kind: {forward, backward}}");
  std::map<std::string, UnitCost> out;
  for (const auto& [kind, c] : j["fits"].items()) {
    std::string w = where + ".fits." + kind;
    DT_CHECK(c.is_object() && c.contains("forward") && c.contains("backward"), InvalidArgument,
             w << ": needs \"forward\" and \"backward\"");
    const bool step_less_layers = kind == "mlp_step" || kind.rfind("mlp_step@", 0) == 0;
    out[kind].fwd = fit_of(c["forward"], w + ".forward", step_less_layers);
    out[kind].bwd = fit_of(c["backward"], w + ".backward", step_less_layers);
    for (auto [key, dst] : {std::pair<const char*, double*>{"act_bytes_per_item", &out[kind].act_b_per_item},
                            {"peak_bytes_per_item", &out[kind].peak_b_per_item},
                            {"act_bytes_per_elem", &out[kind].act_b_per_elem},
                            {"peak_bytes_per_elem", &out[kind].peak_b_per_elem},
                            {"act_bytes_per_score", &out[kind].act_b_per_score},
                            {"peak_bytes_per_score", &out[kind].peak_b_per_score}}) {
      if (!c.contains(key)) continue;
      DT_CHECK(c[key].is_number() && c[key].get<double>() >= 0, InvalidArgument, w << "." << key << " must be a number >= 0");
      *dst = c[key].get<double>();
    }
  }
  // The timed points (optional: a cluster file may carry fits alone), for UnitCost::pass.
  if (j.contains("points")) {
    DT_CHECK(j["points"].is_array(), InvalidArgument, where << ".points must be an array");
    std::vector<UnitPoint> points;
    for (const auto& q : j["points"]) {
      const std::string w = where + ".points[" + std::to_string(points.size()) + "]";
      DT_CHECK(q.is_object() && q.contains("kind") && q["kind"].is_string() && q.contains("spec") && q["spec"].is_string() &&
                   q.contains("unit") && q["unit"].is_number_integer() && q.contains("items") &&
                   q["items"].is_number_integer() && q["items"].get<int64_t>() > 0 && q.contains("forward_us") &&
                   q["forward_us"].is_number() && q.contains("backward_us") && q["backward_us"].is_number(),
               InvalidArgument, w << ": needs kind, spec, unit, items > 0, forward_us and backward_us");
      UnitPoint p{q["kind"].get<std::string>(), q["spec"].get<std::string>(), q["unit"].get<int>(), q["items"].get<int64_t>()};
      p.fwd_s = q["forward_us"].get<double>() * 1e-6, p.bwd_s = q["backward_us"].get<double>() * 1e-6;
      points.push_back(p);
    }
    attach_timed(out, points);
  }
  return out;
}

}  // namespace dtrain::plan
