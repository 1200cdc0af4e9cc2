#include "plan/planner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "base/error.h"
#include "plan/closed_forms.h"

namespace dtrain::plan {
namespace {

std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

std::string gpt_strategy_name(const Layout& l) {
  int parts = (l.dp > 1) + (l.tp > 1) + (l.pp > 1);
  if (parts >= 2) return "hybrid";
  if (l.tp > 1) return "tp";
  if (l.pp > 1) return "pp";
  if (l.dp > 1) return l.zero > 0 ? "zero" : "ddp";
  return "single";
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

}  // namespace

// Enumeration: the GPT's mesh factorisations first (tp outermost, then pp), and inside each
// the knobs that change its cost: ZeRO stage, micro-batches, schedule, recompute (and, for the
// MLP's ddp, buckets).
std::vector<Layout> enumerate_layouts(const ModelSpec& m, int ranks, int64_t batch, const PlanOptions& o) {
  DT_CHECK(ranks >= 1, InvalidArgument, "--ranks must be >= 1, got " << ranks);
  DT_CHECK(batch >= 1, InvalidArgument, "--batch must be >= 1, got " << batch);
  std::vector<Layout> out;
  const std::vector<double> buckets{1, 4, 16};
  if (!m.gpt) {
    auto want = [&](const std::string& s) { return o.strategy.empty() ? s == "ddp" : o.strategy == s; };
    if (ranks == 1 && (o.strategy.empty() || o.strategy == "single")) out.push_back({.strategy = "single"});
    if (ranks > 1 && want("ddp"))
      for (int z = 0; z <= 2; ++z)
        for (double b : buckets) out.push_back({.strategy = "ddp", .dp = ranks, .zero = z, .bucket_mb = b});
    for (const char* s : {"ps", "localsgd", "gossip", "fedavg"})
      if (ranks > 1 && want(s))
        out.push_back({.strategy = s, .dp = ranks});
    return out;
  }
  const int units = static_cast<int>(m.units.size());
  for (int tp : divisors(ranks)) {
    if (m.heads % tp) continue;
    for (int pp : divisors(ranks / tp)) {
      if (pp > units) continue;
      int dp = ranks / tp / pp;
      std::vector<std::pair<std::string, int>> scheds;
      if (pp == 1) scheds = {{"1f1b", 1}};
      else
        scheds = {{"gpipe", 1}, {"1f1b", 1}, {"interleaved", 2}, {"interleaved", 4}};
      for (int zero = 0; zero <= 3; ++zero) {
        if (zero > 0 && dp == 1) break;
        if (zero == 3 && (tp > 1 || pp > 1)) break;
        for (int micro = 1; micro <= o.max_micro; micro *= 2) {
          if (batch % (static_cast<int64_t>(dp) * micro)) break;
          if (pp == 1 && micro > 1) break;
          for (const auto& [sch, v] : scheds) {
            if (v > 1 && (micro % pp || pp * v > units)) continue;
            // One micro-batch: 1F1B's instruction list is GPipe's (each stage one forward,
            // then one backward), so it would only be listed twice with the same cost.
            if (micro == 1 && pp > 1 && sch == "1f1b") continue;
            for (int rc = 0; rc <= 1; ++rc) {
              // No bucket sizes: the GPT's data-parallel sync is one bucket, the stage's whole
              // gradient (parallel/model_parallel.cc; dtrain train refuses --bucket-mb for it).
              Layout l{.dp = dp, .tp = tp, .pp = pp, .zero = zero, .micro = micro, .schedule = sch,
                       .virtual_stages = v, .recompute = rc == 1, .bucket_mb = 0};
              l.strategy = gpt_strategy_name(l);
              if (!o.strategy.empty() && o.strategy != l.strategy) continue;
              out.push_back(l);
            }
          }
        }
      }
    }
  }
  return out;
}

PlanResult plan(const ModelSpec& m, int ranks, const Cluster& c, int64_t batch, const PlanOptions& o) {
  auto t0 = std::chrono::steady_clock::now();
  PlanResult r;
  const double mem_limit = (o.memory_gb > 0 ? o.memory_gb : c.memory_gb) * 1e9;
  auto layouts = enumerate_layouts(m, ranks, batch, o);
  optimizer_family(o.optimizer, m.gpt);  // an unknown name fails here, once
  for (auto& l : layouts) l.optimizer = o.optimizer, l.train_rows = o.train_rows;
  r.enumerated = static_cast<int>(layouts.size());
  for (const auto& l : layouts) {
    Prediction p = simulate(m, l, c, batch, mem_limit);
    if (p.over_memory || p.memory_b() > mem_limit) {
      ++r.dropped_memory;
      continue;
    }
    r.ranked.push_back({l, p});
  }
  std::stable_sort(r.ranked.begin(), r.ranked.end(), [](const Candidate& a, const Candidate& b) {
    if (a.pred.step_s != b.pred.step_s) return a.pred.step_s < b.pred.step_s;
    return a.pred.memory_b() < b.pred.memory_b();
  });
  if (r.ranked.size() >= 2) {
    // The component that separates the winner from the runner-up most.
    // Compare with the first layout that is predicted slower (equal ones tie on this model).
    size_t k = 1;
    while (k + 1 < r.ranked.size() && r.ranked[k].pred.step_s == r.ranked[0].pred.step_s) ++k;
    const Prediction &a = r.ranked[0].pred, &b = r.ranked[k].pred;
    std::pair<double, const char*> d[] = {{b.compute_s - a.compute_s, "compute"},
                                          {b.comm_s - a.comm_s, "exposed communication"},
                                          {b.bubble_s - a.bubble_s, "pipeline bubble and transfers"},
                                          {b.optimizer_s - a.optimizer_s, "optimizer"}};
    auto best = *std::max_element(std::begin(d), std::end(d));
    std::ostringstream w;
    if (k > 1) w << "(" << k - 1 << " layouts tie with it) ";
    w << r.ranked[0].layout.describe() << " beats " << r.ranked[k].layout.describe() << " by "
      << fmt("%.3f", (b.step_s - a.step_s) * 1e3) << " ms/step, mostly " << best.second << " ("
      << fmt("%.3f", best.first * 1e3) << " ms less)";
    r.why = w.str();
    const double edge = a.step_s * (1 + kCloseShare);
    while (r.close_to_best + 1 < static_cast<int>(r.ranked.size()) && r.ranked[r.close_to_best + 1].pred.step_s <= edge)
      ++r.close_to_best;
    if (r.close_to_best > 0) {
      const std::string first = std::to_string(std::min(r.close_to_best + 1, 5));
      r.close = std::to_string(r.close_to_best) + (r.close_to_best == 1 ? " layout is" : " layouts are") +
                " predicted within " + fmt("%.0f", kCloseShare * 100) +
                "% of the winner's step, closer than the model's error on a shared machine: time the first " + first +
                " here (--measure " + first + " --repeats 3: each run three times, the medians compared) before settling on one";
    }
  } else if (r.ranked.size() == 1) {
    r.why = "the only layout that fits";
  } else {
    r.why = "no layout fits in memory: raise --memory-gb, add ranks or use a smaller model";
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string format_plan_table(const ModelSpec& m, int ranks, int64_t batch, const Cluster& c, const PlanResult& r, int top) {
  std::ostringstream o;
  o << "model " << m.spec << " (" << fmt("%.3g", m.params()) << " parameters), " << ranks << " ranks, batch " << batch
    << ", cluster " << c.name << " (" << c.source << ")\n";
  o << r.enumerated << " layouts, " << r.dropped_memory << " over memory, planned in " << fmt("%.3f", r.seconds) << " s\n\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-4s %-48s %10s %9s %9s %9s %9s %10s %10s\n", "#", "layout", "step ms", "compute",
                "comm", "bubble", "optim", "mem MB", "dp MB/st");
  o << line;
  for (int i = 0; i < std::min<int>(top, static_cast<int>(r.ranked.size())); ++i) {
    const auto& [l, p] = r.ranked[i];
    std::snprintf(line, sizeof line, "%-4d %-48s %10.3f %9.3f %9.3f %9.3f %9.3f %10.1f %10.2f\n", i + 1,
                  l.describe().c_str(), p.step_s * 1e3, p.compute_s * 1e3, p.comm_s * 1e3, p.bubble_s * 1e3,
                  p.optimizer_s * 1e3, p.memory_b() / 1e6, p.dp_bytes / 1e6);
    o << line;
  }
  o << "\nwhy: " << r.why << "\n";
  if (!r.close.empty()) o << "close: " << r.close << "\n";
  return o.str();
}

ScaleResult scale(const ModelSpec& m, const Cluster& c, int64_t per_rank, int max_ranks, const PlanOptions& o) {
  DT_CHECK(max_ranks >= 1 && max_ranks <= (1 << 20), InvalidArgument, "--max-ranks must be in 1..1048576");
  ScaleResult s;
  double base = 0;
  std::vector<std::pair<double, double>> pts;
  for (int n = 1; n <= max_ranks; n *= 2) {
    PlanResult r = plan(m, n, c, per_rank * n, o);
    if (r.ranked.empty()) continue;
    ScalePoint pt;
    pt.ranks = n;
    pt.layout = r.ranked[0].layout;
    pt.step_s = r.ranked[0].pred.step_s;
    pt.throughput = per_rank * n / pt.step_s;
    if (base == 0) base = pt.throughput / n;
    pt.speedup = pt.throughput / base;
    pt.efficiency = pt.speedup / n;
    s.points.push_back(pt);
    pts.push_back({static_cast<double>(n), pt.speedup});
  }
  if (pts.size() >= 2) s.amdahl_serial = fit_amdahl(pts), s.gustafson_serial = fit_gustafson(pts);
  return s;
}

// Log-log axes: x = log2 N, y = log2 speedup; the ideal line y = x, the measured points and
// both fitted curves.
std::string svg_chart(const ScaleResult& s, const std::string& title) {
  const double W = 640, H = 420, L = 60, B = 50, R = 20, T = 40;
  double xmax = 1, ymax = 1;
  for (const auto& p : s.points) xmax = std::max(xmax, std::log2(p.ranks)), ymax = std::max(ymax, std::log2(p.ranks));
  auto X = [&](double n) { return L + std::log2(n) / xmax * (W - L - R); };
  auto Y = [&](double sp) { return H - B - std::log2(std::max(sp, 1.0)) / ymax * (H - B - T); };
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o << "<text x=\"" << L << "\" y=\"20\" font-size=\"14\">" << title << "</text>\n";
  o << "<line x1=\"" << L << "\" y1=\"" << H - B << "\" x2=\"" << W - R << "\" y2=\"" << H - B << "\" stroke=\"black\"/>\n";
  o << "<line x1=\"" << L << "\" y1=\"" << H - B << "\" x2=\"" << L << "\" y2=\"" << T << "\" stroke=\"black\"/>\n";
  for (int e = 0; e <= xmax; e += 2) {
    double n = std::pow(2, e);
    o << "<text x=\"" << X(n) - 10 << "\" y=\"" << H - B + 18 << "\">" << static_cast<long>(n) << "</text>\n";
    o << "<text x=\"" << 8 << "\" y=\"" << Y(n) + 4 << "\">" << static_cast<long>(n) << "</text>\n";
  }
  o << "<text x=\"" << W / 2 << "\" y=\"" << H - 10 << "\">ranks N</text>\n";
  o << "<text x=\"8\" y=\"" << T - 8 << "\">speedup</text>\n";
  auto poly = [&](auto f, const char* color, const char* dash) {
    o << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-dasharray=\"" << dash << "\" points=\"";
    for (const auto& p : s.points) o << X(p.ranks) << "," << Y(f(p)) << " ";
    o << "\"/>\n";
  };
  poly([](const ScalePoint& p) { return static_cast<double>(p.ranks); }, "gray", "4,4");
  poly([&](const ScalePoint& p) { return amdahl_speedup(s.amdahl_serial, p.ranks); }, "red", "2,2");
  poly([&](const ScalePoint& p) { return gustafson_speedup(s.gustafson_serial, p.ranks); }, "green", "6,2");
  poly([](const ScalePoint& p) { return p.speedup; }, "blue", "");
  for (const auto& p : s.points) o << "<circle cx=\"" << X(p.ranks) << "\" cy=\"" << Y(p.speedup) << "\" r=\"3\" fill=\"blue\"/>\n";
  o << "<text x=\"" << L + 10 << "\" y=\"" << T + 15 << "\" fill=\"blue\">predicted</text>\n";
  o << "<text x=\"" << L + 10 << "\" y=\"" << T + 30 << "\" fill=\"red\">Amdahl s=" << fmt("%.2e", s.amdahl_serial) << "</text>\n";
  o << "<text x=\"" << L + 10 << "\" y=\"" << T + 45 << "\" fill=\"green\">Gustafson s=" << fmt("%.2e", s.gustafson_serial) << "</text>\n";
  o << "<text x=\"" << L + 10 << "\" y=\"" << T + 60 << "\" fill=\"gray\">ideal</text>\n";
  o << "</svg>\n";
  return o.str();
}

}  // namespace dtrain::plan
