// Unit calibration: the cost-line fit, its file format and versions, what the simulator does
// with it, and that the real units run (positive times, work from the model's own units).
#include "plan/calibrate_units.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <thread>
#include <utility>

#include "base/error.h"
#include "plan/calibrate_compute.h"
#include "plan/calibrate_mix.h"
#include "plan/cluster.h"
#include "plan/sim_costs.h"
#include "plan/simulator.h"

namespace dtrain::plan {
namespace {

TEST(CalibrateUnits, FitRecoversAnExactLine) {
  UnitFit f = fit_line({{0, 2e-6}, {1e6, 3e-6}, {3e6, 5e-6}});  // 2 us + 1 ns per 1000 work
  EXPECT_NEAR(f.fixed_s, 2e-6, 1e-15);
  EXPECT_NEAR(f.s_per_work, 1e-12, 1e-21);
  EXPECT_NEAR(f.at(2e6), 4e-6, 1e-15);
}

TEST(CalibrateUnits, FitKeepsCoefficientsNonNegative) {
  // Least squares would give a negative intercept: refitted through the origin.
  UnitFit a = fit_line({{1, 0.5}, {2, 2.0}, {3, 3.5}});
  EXPECT_DOUBLE_EQ(a.fixed_s, 0);
  EXPECT_NEAR(a.s_per_work, (0.5 + 4.0 + 10.5) / 14.0, 1e-12);
  // A negative slope (noise on a flat cost): the mean, as a constant.
  UnitFit b = fit_line({{1, 3.0}, {2, 2.0}});
  EXPECT_DOUBLE_EQ(b.s_per_work, 0);
  EXPECT_DOUBLE_EQ(b.fixed_s, 2.5);
  // One point: a constant.
  UnitFit c = fit_line({{5, 7.0}});
  EXPECT_DOUBLE_EQ(c.fixed_s, 7.0);
  EXPECT_THROW(fit_line({}), InvalidArgument);
}

TEST(CalibrateUnits, FitCapsANoisyIntercept) {
  // Two points whose line has an intercept of 0.9 (noise at the small point): capped at 0.2 x
  // the smallest point's time (1.0), slope through (0, 0.2) by least squares.
  UnitFit f = fit_line({{1, 1.0}, {10, 1.9}}, 0.2);
  EXPECT_DOUBLE_EQ(f.fixed_s, 0.2);
  EXPECT_NEAR(f.s_per_work, (1 * 0.8 + 10 * 1.7) / 101.0, 1e-12);
  // A small intercept is kept; without a cap the least-squares line.
  EXPECT_NEAR(fit_line({{1, 1.1}, {10, 10.1}}, 0.2).fixed_s, 0.1, 1e-12);
  EXPECT_NEAR(fit_line({{1, 1.0}, {10, 1.9}}).fixed_s, 0.9, 1e-12);
}

TEST(CalibrateUnits, PlaneSeparatesPerWeightFromPerExampleCost) {
  // Three layers of 1000, 100 and 10 parameters at 1, 4 and 16 items: t = 1 us + 2 ns per
  // unit of work + 0.5 ns per parameter, exactly. A line in work alone cannot carry the
  // weights' share (it charges the small layer the big one's); the plane recovers all three.
  std::vector<PlanePoint> pts;
  for (double P : {1000.0, 100.0, 10.0})
    for (double items : {1.0, 4.0, 16.0}) {
      const double work = items * P * 2;
      pts.push_back({work, P, 1e-6 + 2e-9 * work + 0.5e-9 * P});
    }
  UnitFit f = fit_plane(pts);
  EXPECT_NEAR(f.fixed_s, 1e-6, 1e-12);
  EXPECT_NEAR(f.s_per_work, 2e-9, 1e-15);
  EXPECT_NEAR(f.s_per_param, 0.5e-9, 1e-15);
  EXPECT_NEAR(f.at(8 * 5000 * 2, 5000), 1e-6 + 2e-9 * 80000 + 0.5e-9 * 5000, 1e-12);
  // A single parameter count: the line fit, no parameter term.
  UnitFit g = fit_plane({{100, 7, 2e-6}, {300, 7, 4e-6}});
  EXPECT_DOUBLE_EQ(g.s_per_param, 0);
  EXPECT_NEAR(g.s_per_work, 1e-8, 1e-18);
  // Data whose best parameter coefficient would be negative: the term is dropped, not
  // allowed below zero.
  UnitFit h = fit_plane({{10, 100, 2e-6}, {10, 10, 3e-6}, {20, 100, 4e-6}, {20, 10, 5e-6}});
  EXPECT_GE(h.s_per_param, 0);
  EXPECT_GE(h.fixed_s, 0);
  EXPECT_GE(h.s_per_work, 0);
  // The intercept cap holds on the plane too.
  std::vector<PlanePoint> noisy = pts;
  for (auto& p : noisy) p.t += 50e-6;  // a big constant at every point
  UnitFit c = fit_plane(noisy, 0.2);
  const double least_work = 1 * 10 * 2;
  EXPECT_LE(c.fixed_s, 0.2 * (1e-6 + 2e-9 * least_work + 0.5e-9 * 10 + 50e-6) + 1e-15);
  EXPECT_THROW(fit_plane({}), InvalidArgument);
}

TEST(CalibrateUnits, FitsGroupByKindAndRoundTripThroughJson) {
  std::vector<UnitPoint> pts{{"mlp_layer", "mlp:4-2", 0, 1, 100, 1e-6, 2e-6},
                             {"mlp_layer", "mlp:4-2", 0, 2, 200, 2e-6, 4e-6},
                             {"gpt_head", "gpt:layers=1", 2, 1, 10, 5e-6, 6e-6}};
  auto fits = fit_units(pts);
  ASSERT_EQ(fits.size(), 2u);
  EXPECT_NEAR(fits["mlp_layer"].fwd.s_per_work, 1e-8, 1e-18);
  EXPECT_NEAR(fits["mlp_layer"].bwd.s_per_work, 2e-8, 1e-18);
  EXPECT_DOUBLE_EQ(fits["gpt_head"].bwd.fixed_s, 6e-6);
  nlohmann::json j = units_json(pts, fits);
  EXPECT_EQ(j["points"].size(), 3u);
  auto back = units_from_json(j, "test");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_NEAR(back["mlp_layer"].bwd.s_per_work, 2e-8, 1e-18);
  EXPECT_NEAR(back["gpt_head"].fwd.fixed_s, 5e-6, 1e-15);
  // The MLP step less its timed layers is signed (a whole step may run faster than its
  // layers timed apart): a file `bench calibrate` wrote with a negative one is read back.
  j["fits"]["mlp_step"] = {{"forward", {{"fixed_us", -59.8}, {"ns_per_kwork", 0}}},
                           {"backward", {{"fixed_us", 0}, {"ns_per_kwork", 0}}}};
  j["fits"]["mlp_step@mlp:4-2"] = j["fits"]["mlp_step"];
  back = units_from_json(j, "test");
  EXPECT_NEAR(back["mlp_step"].fwd.fixed_s, -59.8e-6, 1e-15);
  EXPECT_NEAR(back["mlp_step@mlp:4-2"].fwd.fixed_s, -59.8e-6, 1e-15);
  j["fits"]["gpt_head"]["forward"]["fixed_us"] = -1;  // any other kind: refused
  EXPECT_THROW(units_from_json(j, "test"), InvalidArgument);
  EXPECT_THROW(units_from_json(nlohmann::json::array(), "test"), InvalidArgument);
}

// A unit priced far past the shapes its kind was timed at is named (the prediction says so
// with the command that times the model's own); a timed unit, one within 2x of the largest
// timed, or a machine without calibrated lines is not.
TEST(CalibrateUnits, AUnitFarPastTheTimedShapesIsNamed) {
  const std::string small = "mlp:784-256-128-10", wide = "mlp:784-1024-1024-1024-10";
  auto points_of_model = [](const std::string& spec) {
    std::vector<UnitPoint> pts;
    const ModelSpec m = ModelSpec::parse(spec);
    for (size_t u = 0; u < m.units.size(); ++u)
      for (int64_t items : {8, 16}) {
        const double work = static_cast<double>(items) * unit_work(m.units[u]);
        pts.push_back({"mlp_layer", spec, static_cast<int>(u), items, work, work * 5e-12, work * 6e-12});
      }
    return pts;
  };
  Cluster c;
  c.units = fit_units(points_of_model(small));
  const auto x = extrapolated_unit(ModelSpec::parse(wide), c);
  ASSERT_TRUE(x.has_value());
  EXPECT_EQ(x->unit, "fc1");  // the first 1024x1024 layer (fc2 is the same size)
  EXPECT_EQ(x->kind, "mlp_layer");
  EXPECT_DOUBLE_EQ(x->params, 1024.0 * 1024 + 1024);
  EXPECT_DOUBLE_EQ(x->largest_timed_params, 784.0 * 256 + 256);
  EXPECT_FALSE(extrapolated_unit(ModelSpec::parse(small), c).has_value());            // timed itself
  EXPECT_FALSE(extrapolated_unit(ModelSpec::parse("mlp:784-300-10"), c).has_value());  // 235,500: within 2x
  EXPECT_TRUE(extrapolated_unit(ModelSpec::parse("mlp:784-300-10"), c, 1.1).has_value());
  EXPECT_FALSE(extrapolated_unit(ModelSpec::parse(wide), Cluster{}).has_value());       // nothing calibrated
  // Once the wide model is timed as well (`bench calibrate --models`), its own lines price it.
  std::vector<UnitPoint> both = points_of_model(small), more = points_of_model(wide);
  both.insert(both.end(), more.begin(), more.end());
  c.units = fit_units(both);
  EXPECT_FALSE(extrapolated_unit(ModelSpec::parse(wide), c).has_value());
}

// A kind timed on two models also gets each model's own line ("kind@spec"), which the
// simulator's lookup (Cluster::unit_for) prefers for that model; other models get the kind's.
TEST(CalibrateUnits, EachTimedModelKeepsItsOwnLine) {
  std::vector<UnitPoint> pts{{"mlp_layer", "mlp:4-2", 0, 1, 100, 1e-6, 2e-6},
                             {"mlp_layer", "mlp:4-2", 0, 2, 200, 2e-6, 4e-6},
                             {"mlp_layer", "mlp:8-4", 0, 1, 100, 3e-6, 6e-6},
                             {"mlp_layer", "mlp:8-4", 0, 2, 200, 6e-6, 12e-6}};
  Cluster c;
  c.units = fit_units(pts);
  ASSERT_EQ(c.units.size(), 3u);
  ASSERT_NE(c.unit_for("mlp_layer", "mlp:4-2"), nullptr);
  EXPECT_NEAR(c.unit_for("mlp_layer", "mlp:4-2")->fwd.s_per_work, 1e-8, 1e-18);
  EXPECT_NEAR(c.unit_for("mlp_layer", "mlp:8-4")->fwd.s_per_work, 3e-8, 1e-18);
  EXPECT_EQ(c.unit_for("mlp_layer", "mlp:16-2"), &c.units.at("mlp_layer"));  // no own line: the kind's
  EXPECT_EQ(c.unit_for("gpt_block", "mlp:4-2"), nullptr);
  // One model per kind: no per-model copy of the kind's line.
  pts.resize(2);
  EXPECT_EQ(fit_units(pts).size(), 1u);
}

// A calibration file in the temporary directory, removed when it goes out of scope (an
// assertion that ends the test early included).
class TmpFile {
 public:
  explicit TmpFile(std::string path) : path_(std::move(path)) {}
  TmpFile(TmpFile&& o) noexcept : path_(std::exchange(o.path_, "")) {}
  TmpFile& operator=(TmpFile&& o) noexcept {
    if (this != &o) {
      drop();
      path_ = std::exchange(o.path_, "");
    }
    return *this;
  }
  ~TmpFile() { drop(); }
  operator const std::string&() const { return path_; }

 private:
  void drop() {
    if (!path_.empty()) std::remove(path_.c_str());
  }
  std::string path_;
};

TmpFile write_tmp(const nlohmann::json& j) {
  std::string name = (std::filesystem::temp_directory_path() / "dtrain_calib_XXXXXX").string();
  const int fd = mkstemp(name.data());
  if (fd < 0) throw std::runtime_error("mkstemp " + name);
  close(fd);
  std::ofstream(name) << j.dump();
  return TmpFile(name);
}

nlohmann::json calibration(int version, bool units) {
  nlohmann::json compute = {{"gemm_gflops", 20}, {"elementwise_gbps", 5}, {"optimizer_ns_per_param", 3}};
  if (units) compute["units"] = units_json({}, {{"mlp_layer", {{1e-6, 1e-12}, {2e-6, 2e-12}}}});
  return {{"version", version}, {"compute", compute}};
}

TEST(CalibrateUnits, CalibrationFileVersions) {
  TmpFile v3 = write_tmp(calibration(3, true)), v2 = write_tmp(calibration(2, false)),
          v9 = write_tmp(calibration(9, true));
  Cluster c3 = this_machine(v3);
  ASSERT_EQ(c3.units.count("mlp_layer"), 1u);
  EXPECT_NEAR(c3.units["mlp_layer"].bwd.fixed_s, 2e-6, 1e-15);
  EXPECT_DOUBLE_EQ(c3.gemm_flops, 20e9);
  Cluster c2 = this_machine(v2);  // old file: read, rates kept, no unit timings, says so
  EXPECT_TRUE(c2.units.empty());
  EXPECT_DOUBLE_EQ(c2.gemm_flops, 20e9);
  EXPECT_NE(c2.source.find("calibrate"), std::string::npos) << c2.source;
  EXPECT_THROW(this_machine(v9), InvalidArgument);  // newer than this binary
}

// A calibration file prices the host that measured it: its core count comes with it, and a
// file from a host of another size says so.
TEST(CalibrateUnits, CalibrationCarriesItsHostsCores) {
  const int here = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int other = here == 16 ? 32 : 16;
  nlohmann::json j = calibration(3, true);
  j["compute"]["cores"] = other;
  TmpFile f = write_tmp(j);
  Cluster c = this_machine(f);
  EXPECT_EQ(c.cores_per_node, other);
  EXPECT_NE(c.source.find("host of " + std::to_string(other) + " cores"), std::string::npos) << c.source;
  j["compute"]["cores"] = here;  // its own host: nothing to say
  f = write_tmp(j);
  c = this_machine(f);
  EXPECT_EQ(c.cores_per_node, here);
  EXPECT_EQ(c.source.find("host of"), std::string::npos) << c.source;
  j["compute"]["cores"] = 0;
  f = write_tmp(j);
  EXPECT_THROW(this_machine(f), InvalidArgument);
}

// The collectives are timed at 2, 4 and 8 ranks, and at every power of two up to the host's
// cores beyond that (at most 64).
TEST(CalibrateUnits, CollectivesAreTimedUpToTheCores) {
  EXPECT_EQ(calibrated_rank_counts(2), (std::vector<int>{2, 4, 8}));
  EXPECT_EQ(calibrated_rank_counts(8), (std::vector<int>{2, 4, 8}));
  EXPECT_EQ(calibrated_rank_counts(16), (std::vector<int>{2, 4, 8, 16}));
  EXPECT_EQ(calibrated_rank_counts(31), (std::vector<int>{2, 4, 8, 16}));
  EXPECT_EQ(calibrated_rank_counts(256), (std::vector<int>{2, 4, 8, 16, 32, 64}));
}

TEST(CalibrateUnits, SpeedProbeScalesCompute) {
  // A probe re-measured after calibration at 1.5x the calibration's pass scales compute by 1.5.
  nlohmann::json j = calibration(3, true);
  j["compute"]["speed_probe_s"] = 2e-3;
  j["compute"]["speed_probe_now_s"] = 3e-3;
  // The forked-process pass of older files is recorded, never applied (it counted start-up).
  j["compute"]["probe_pass_s"] = 1e-3;
  j["compute"]["probe_now_pass_s"] = 9e-3;
  TmpFile f = write_tmp(j);
  Cluster c = this_machine(f);
  EXPECT_NEAR(c.units["mlp_layer"].fwd.fixed_s, 1.5e-6, 1e-15);
  EXPECT_NEAR(c.units["mlp_layer"].bwd.s_per_work, 3e-12, 1e-21);
  EXPECT_NEAR(c.gemm_flops, 20e9 / 1.5, 1);
  EXPECT_NEAR(c.optimizer_ns_per_param, 4.5, 1e-12);
  EXPECT_NE(c.source.find("re-probed"), std::string::npos) << c.source;
  // Without a re-probe (or without the reference) nothing changes.
  j["compute"].erase("speed_probe_now_s");
  f = write_tmp(j);
  EXPECT_NEAR(this_machine(f).units["mlp_layer"].fwd.fixed_s, 1e-6, 1e-15);
  EXPECT_EQ(this_machine(f).source.find("re-probed"), std::string::npos);
  // A probe 10x off measured something else: held at 4x.
  Cluster base;
  base.gemm_flops = 8e9;
  EXPECT_NEAR(at_compute_pace(base, 10).gemm_flops, 2e9, 1);
  EXPECT_NEAR(at_compute_pace(base, 0.5).gemm_flops, 16e9, 1);
  // A pace replaces the one before (a run's probe after the file's re-probe), back to 1 too.
  Cluster twice = at_compute_pace(at_compute_pace(base, 2), 0.5);
  EXPECT_NEAR(twice.gemm_flops, 16e9, 1);
  EXPECT_DOUBLE_EQ(twice.compute_scale, 0.5);
  EXPECT_NEAR(at_compute_pace(twice, 1).gemm_flops, 8e9, 1);
  EXPECT_EQ(at_compute_pace(twice, 1).source, base.source);
}

// The speed probe runs in this process and reports one pass (a few ms here), not the
// seconds of a process's start-up.
TEST(CalibrateUnits, SpeedProbeTimesOnePass) {
  const double s = speed_probe(0.05);
  EXPECT_GT(s, 0);
  EXPECT_LT(s, 1.0);
}

// One pass for each CPU this thread may run on, and the thread's own affinity given back.
TEST(CalibrateUnits, SpeedProbeTimesEachCpuInTurn) {
  cpu_set_t before;
  ASSERT_EQ(::pthread_getaffinity_np(::pthread_self(), sizeof before, &before), 0);
  const std::vector<double> passes = speed_probe_each_cpu(0.02);
  ASSERT_EQ(static_cast<int>(passes.size()), CPU_COUNT(&before));
  for (double s : passes) {
    EXPECT_GT(s, 0);
    EXPECT_LT(s, 1.0);
  }
  cpu_set_t after;
  ASSERT_EQ(::pthread_getaffinity_np(::pthread_self(), sizeof after, &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&before, &after));
}

// Lockstep ranks take the fastest CPUs they need and wait for the slowest of them.
TEST(CalibrateUnits, LockstepRanksComputeAtTheirSlowestCpu) {
  const std::vector<double> passes{4e-3, 3e-3, 5e-3, 3.5e-3};
  EXPECT_DOUBLE_EQ(lockstep_probe(passes, 1), 3e-3);
  EXPECT_DOUBLE_EQ(lockstep_probe(passes, 2), 3.5e-3);
  EXPECT_DOUBLE_EQ(lockstep_probe(passes, 4), 5e-3);
  EXPECT_DOUBLE_EQ(lockstep_probe(passes, 8), 5e-3);  // beyond the CPUs: every one, the slowest
  EXPECT_DOUBLE_EQ(lockstep_probe(passes, 0), 3e-3);  // a nonsense count reads as one rank
  EXPECT_EQ(lockstep_probe({}, 2), 0);
}

TEST(CalibrateUnits, SimulatorUsesTheCalibratedLines) {
  ModelSpec m = ModelSpec::parse("mlp:100-10");
  Cluster c;
  c.cores_per_node = 8;
  c.sgd_ns_per_param = 0;
  c.units["mlp_layer"] = {{1e-5, 1e-9}, {3e-5, 2e-9}};
  Prediction p = simulate(m, {.strategy = "single"}, c, 50);
  const double work = 50 * unit_work(m.units[0]);
  EXPECT_NEAR(p.compute_s, 1e-5 + work * 1e-9 + 3e-5 + work * 2e-9, 1e-15);
  // The cluster file format carries them too.
  Cluster back = cluster_from_json(cluster_to_json(c), "roundtrip");
  EXPECT_NEAR(back.units["mlp_layer"].bwd.fixed_s, 3e-5, 1e-15);
}

// A unit's own timed points price it where it has them: linear in items between two, the
// fit's shape beyond them, the fit for any other unit. (A single plane over a kind whose
// kernels change with the rows, as OpenBLAS above 64 rows and gemm_small below, missed
// every shape on a host where the two differed 9x.)
TEST(CalibrateUnits, TimedPointsPriceTheirOwnUnit) {
  const std::string spec = "mlp:8-4-3";
  const ModelSpec m = ModelSpec::parse(spec);
  std::vector<UnitPoint> pts;
  for (auto [items, f] : {std::pair{8, 1e-3}, {64, 2e-3}, {128, 10e-3}}) {
    UnitPoint p{"mlp_layer", spec, 0, items, items * unit_work(m.units[0])};
    p.fwd_s = f, p.bwd_s = 2 * f;
    pts.push_back(p);
  }
  const std::map<std::string, UnitCost> fits = fit_units(pts);
  const UnitCost& u = fits.at("mlp_layer");
  const double P = m.units[0].params, w1 = unit_work(m.units[0]);
  auto at = [&](double items) { return u.pass(spec, P, items, items * w1); };
  EXPECT_NEAR(at(64).first, 2e-3, 1e-12);
  EXPECT_NEAR(at(32).first, 1e-3 + 24.0 / 56 * 1e-3, 1e-12);  // between 8 and 64
  EXPECT_NEAR(at(96).second, 2 * 6e-3, 1e-12);                // between 64 and 128
  // Above the points: the last, times the fit's ratio. Below them: the first two points'
  // line extended (the fixed cost a pass keeps), never below the first scaled in proportion.
  EXPECT_NEAR(at(256).first, 10e-3 * u.fwd.at(256 * w1, P) / u.fwd.at(128 * w1, P), 1e-12);
  EXPECT_NEAR(at(4).first, 1e-3 - 4.0 / 56 * 1e-3, 1e-12);
  EXPECT_NEAR(at(4).second, 2e-3 - 4.0 / 56 * 2e-3, 1e-12);
  {
    std::vector<UnitPoint> steep = pts;  // 8 -> 64 items: 1 -> 20 ms, a line below zero at 4
    steep[1].fwd_s = 20e-3, steep[2].fwd_s = 30e-3;
    const std::map<std::string, UnitCost> sf = fit_units(steep);
    EXPECT_NEAR(sf.at("mlp_layer").pass(spec, P, 4, 4 * w1).first, 0.5e-3, 1e-12);  // half the 8-item point
    std::vector<UnitPoint> twice = pts;  // the unit timed twice at 8 items: the line runs to 64
    twice.push_back(pts[0]);
    const std::map<std::string, UnitCost> tf = fit_units(twice);
    EXPECT_NEAR(tf.at("mlp_layer").pass(spec, P, 4, 4 * w1).first, at(4).first, 1e-12);
  }
  // A point above a later one is noise: the later one's time stands for it.
  std::vector<UnitPoint> noisy = pts;
  noisy[0].fwd_s = 3e-3;  // 8 items read 3 ms, above 64 items' 2 ms
  const std::map<std::string, UnitCost> noisy_fits = fit_units(noisy);
  const UnitCost& nu = noisy_fits.at("mlp_layer");
  EXPECT_NEAR(nu.pass(spec, P, 8, 8 * w1).first, 2e-3, 1e-12);
  EXPECT_NEAR(nu.pass(spec, P, 8, 8 * w1).second, 2e-3, 1e-12);  // backward 2 ms at 8 was below 4 ms at 64: kept
  EXPECT_NEAR(nu.pass(spec, P, 64, 64 * w1).first, 2e-3, 1e-12);
  // Another unit, or another model: the fit.
  EXPECT_DOUBLE_EQ(u.pass(spec, m.units[1].params, 32, 32 * w1).first, u.fwd.at(32 * w1, m.units[1].params));
  EXPECT_DOUBLE_EQ(u.pass("mlp:8-5-3", P, 32, 32 * w1).first, u.fwd.at(32 * w1, P));
  // The calibration file carries the points, and the simulator prices the layer by them.
  const std::map<std::string, UnitCost> back = units_from_json(units_json(pts, fits), "roundtrip");
  EXPECT_NEAR(back.at("mlp_layer").pass(spec, P, 32, 32 * w1).first, at(32).first, 1e-15);
  Cluster c;
  c.cores_per_node = 8;
  c.units = fits;
  const Prediction one = simulate(m, {.strategy = "single"}, c, 32);
  const double P2 = m.units[1].params, w2 = 32 * unit_work(m.units[1]);  // the second layer: fitted
  // (and, not the first, its input's gradient: its forward once more)
  EXPECT_NEAR(one.compute_s, at(32).first + at(32).second + 2 * u.fwd.at(w2, P2) + u.bwd.at(w2, P2), 1e-12);
  // A cluster written out and read back (`plan --json`, then --cluster) keeps the points.
  const Cluster back_cluster = cluster_from_json(cluster_to_json(c), "roundtrip");
  EXPECT_NEAR(simulate(m, {.strategy = "single"}, back_cluster, 32).compute_s, one.compute_s, 1e-12);
  EXPECT_THROW(units_from_json(nlohmann::json{{"fits", nlohmann::json::object()}, {"points", {{{"kind", "mlp_layer"}}}}}, "bad"),
               InvalidArgument);
}

// The GPT's passes are priced by their points too: a pass has a fixed cost that a line
// through the points with its intercept >= 0 loses (the 6x128 block read 1.03 ms a sequence
// at 2, 0.85 at 12, and 1.03 again at 24), so a pipeline of one-sequence micro-batches cost
// the same as one of eight-sequence ones and the planner chose the most micro-batches; on 2
// cores pp4 at 16 micro-batches ran 157 ms a step against 123 at 2. The ZeRO-3 block keeps
// its fit.
TEST(CalibrateUnits, GptPassesKeepTheirFixedCostPerMicroBatch) {
  const std::string spec = "gpt:layers=2,heads=2,width=16,context=8";
  const ModelSpec m = ModelSpec::parse(spec);
  std::vector<UnitPoint> pts;
  for (int items : {2, 6, 12, 24}) {
    const double over = items == 24 ? 1.3 : 1.0;  // the cache overflows at 24
    for (int u : {0, 1, 3}) {                     // embedding, a block, the head
      const std::string kind = u == 0 ? "gpt_embedding" : u == 3 ? "gpt_head" : "gpt_block";
      UnitPoint p{kind, spec, u, items, items * unit_work(m.units[static_cast<size_t>(u)])};
      p.fwd_s = (0.4e-3 + 0.8e-3 * items) * over, p.bwd_s = 2 * p.fwd_s;
      pts.push_back(p);
    }
    UnitPoint z{kZero3Block, spec, 1, items, items * unit_work(m.units[1])};
    z.fwd_s = (0.4e-3 + 0.8e-3 * items) * over, z.bwd_s = 2 * z.fwd_s;
    pts.push_back(z);
  }
  const std::map<std::string, UnitCost> fits = fit_units(pts);
  const UnitCost& block = fits.at("gpt_block");
  const double P = m.units[1].params, w1 = unit_work(m.units[1]);
  EXPECT_NEAR(block.pass(spec, P, 6, 6 * w1).first, 5.2e-3, 1e-12);   // a point
  EXPECT_NEAR(block.pass(spec, P, 4, 4 * w1).first, 3.6e-3, 1e-12);   // between two
  EXPECT_NEAR(block.pass(spec, P, 1, 1 * w1).first, 1.2e-3, 1e-12);   // below: the fixed cost stays
  EXPECT_NEAR(block.pass(spec, P, 1, 1 * w1).second, 2.4e-3, 1e-12);
  const UnitCost& z3 = fits.at(kZero3Block);
  EXPECT_DOUBLE_EQ(z3.pass(spec, P, 4, 4 * w1).first, z3.fwd.at(4 * w1, P));  // the fit
  // A pipeline over the same 8 sequences: the CPU of its passes grows with the micro-batches.
  Cluster c;
  c.cores_per_node = 8;
  c.units = fits;
  auto compute = [&](int micro) {
    double s = 0;
    for (const Unit& u : m.units) {
      const sim::Pass p = sim::unit_pass(c, u, 8.0 / micro, 1, spec);
      s += micro * (p.f + p.b);
    }
    return s;
  };
  EXPECT_GT(compute(8), compute(2) * 1.2);
  // 7 more micro-batches through the 4 units, each pass 0.4 ms forward + 0.8 backward more
  EXPECT_NEAR(compute(8) - compute(1), 7 * 4 * (0.4e-3 + 0.8e-3), 1e-9);
}

// Files from before "mlp_step_of_timed_layers" hold the step less the FITTED layers: the
// loader re-bases each step point onto the timed ones, so step = layers + around still holds
// at every timed item count.
TEST(CalibrateUnits, OlderStepPointsAreRebasedOntoTheTimedLayers) {
  const std::string spec = "mlp:8-4-3";
  const ModelSpec m = ModelSpec::parse(spec);
  std::vector<UnitPoint> pts;
  for (size_t u = 0; u < m.units.size(); ++u)
    for (auto [items, f] : {std::pair{8, 1e-3}, {64, 2e-3}, {128, 10e-3}}) {
      UnitPoint p{"mlp_layer", spec, static_cast<int>(u), items, items * unit_work(m.units[u])};
      p.fwd_s = f * (u + 1), p.bwd_s = f;
      pts.push_back(p);
    }
  const std::map<std::string, UnitCost> layers = fit_units(pts);
  auto layer_sum = [&](double items, bool fitted) {
    double t = 0;
    for (const auto& u : m.units) {
      const double w = items * unit_work(u);
      const auto [f, b] = layers.at("mlp_layer").pass(spec, u.params, items, w);
      t += fitted ? layers.at("mlp_layer").fwd.at(w, u.params) + layers.at("mlp_layer").bwd.at(w, u.params) : f + b;
    }
    return t;
  };
  const double step = 0.05;  // the whole step at 64 items
  // Increasing in items, so the envelope (UnitCost::pass) keeps them as they are.
  for (auto [items, around] : {std::pair{8, -1.0}, {64, step - layer_sum(64, true)}, {128, 1.0}}) {
    UnitPoint p{"mlp_step", spec, 0, items, items * mlp_step_work(m)};
    p.fwd_s = around;
    pts.push_back(p);
  }
  for (bool marked : {false, true}) {
    nlohmann::json compute = {{"gemm_gflops", 20}, {"elementwise_gbps", 5}, {"optimizer_ns_per_param", 3},
                              {"units", units_json(pts, fit_units(pts))}};
    if (marked) compute["mlp_step_of_timed_layers"] = true;
    const TmpFile f = write_tmp({{"version", 3}, {"compute", compute}});
    const Cluster c = this_machine(f);
    const double around = c.units.at("mlp_step").pass(spec, m.params(), 64, 64 * mlp_step_work(m)).first;
    // Unmarked: re-based, so layers (timed) + around is the whole step again; marked: as stored.
    EXPECT_NEAR(around, marked ? step - layer_sum(64, true) : step - layer_sum(64, false), 1e-12) << marked;
  }
}

// The MLP's step around its layers: measured as the executors' whole step less its layers
// timed beside it in the same rounds, a line in items x (inputs + classes), and added by the
// simulator to every MLP strategy's compute (not to the GPT's).
TEST(CalibrateUnits, MlpStepIsTheStepAroundTheLayers) {
  std::vector<UnitPoint> pts = mlp_step_points("mlp:8-4-3", 0.02);
  ASSERT_EQ(pts.size(), kMlpItems.size());
  for (const auto& p : pts) {
    EXPECT_EQ(p.kind, "mlp_step");
    EXPECT_DOUBLE_EQ(p.work, static_cast<double>(p.items) * (8 + 3));
    EXPECT_TRUE(std::isfinite(p.fwd_s)) << p.items;
    EXPECT_LT(std::abs(p.fwd_s), 0.01) << p.items << ": a step of a 8-4-3 MLP is microseconds";
    EXPECT_EQ(p.bwd_s, 0) << p.items;
  }
  // The rounds' differences, not the difference of their medians: the machine ran twice as
  // fast in the second round, and step and layers went together. Signed: layers that cost
  // more than the whole step leave a negative remainder. Rounds must pair up.
  EXPECT_DOUBLE_EQ(step_around_layers({1.0, 0.5, 1.0}, {0.8, 0.4, 0.8}), 0.2);
  EXPECT_DOUBLE_EQ(step_around_layers({1.0, 0.5, 0.9}, {0.8, 0.4, 0.8}), 0.1);
  EXPECT_DOUBLE_EQ(step_around_layers({1.0, 1.2}, {1.5, 1.5}), -0.4);
  EXPECT_THROW(step_around_layers({1.0}, {}), InvalidArgument);
  EXPECT_THROW(step_around_layers({}, {}), InvalidArgument);
  EXPECT_TRUE(mlp_step_points("gpt:layers=1,heads=2,width=16,context=8", 0.01).empty());

  ModelSpec m = ModelSpec::parse("mlp:100-10");
  Cluster c;
  c.cores_per_node = 8;
  c.sgd_ns_per_param = 0;
  c.units["mlp_layer"] = {{1e-5, 1e-9}, {3e-5, 2e-9}};
  const double without = simulate(m, {.strategy = "single"}, c, 50).compute_s;
  c.units["mlp_step"] = {{2e-6, 1e-9}, {0, 0}};
  EXPECT_NEAR(simulate(m, {.strategy = "single"}, c, 50).compute_s - without, 2e-6 + 50 * (100 + 10) * 1e-9, 1e-15);
}

TEST(CalibrateUnits, MeasuresTheRealUnits) {
  std::vector<UnitPoint> pts = unit_points_for("gpt:layers=2,heads=2,width=16,context=8");
  // A layernorm over a block's output, embedding, one block (both are alike) stacked and as
  // ZeRO-3 runs it, head; four item counts (2, 6, 12 and 24 sequences).
  ASSERT_EQ(pts.size(), 20u);
  for (auto& p : unit_points_for("mlp:8-4-2")) pts.push_back(p);
  ASSERT_EQ(pts.size(), 28u);  // two MLP layers of their own shapes, four item counts
  measure_units(pts, 0.05);
  ModelSpec g = ModelSpec::parse("gpt:layers=2,heads=2,width=16,context=8");
  for (const auto& p : pts) {
    EXPECT_GT(p.fwd_s, 0) << p.kind;
    EXPECT_GT(p.bwd_s, 0) << p.kind;
    if (p.kind == "gpt_block" || p.kind == kZero3Block) {
      EXPECT_DOUBLE_EQ(p.work, p.items * unit_work(g.units[1]));
    }
    if (p.kind == "gpt_layernorm") {
      EXPECT_DOUBLE_EQ(p.work, static_cast<double>(p.items * 8 * 16));  // items x context x width
    }
  }
  EXPECT_EQ(fit_units(pts).size(), 6u);
  // Forked processes run a block and exit cleanly. One process's timed passes all lie in
  // its own window; with two, those in the window where both ran are a subset, each no
  // longer than the whole run (the window may hold none on a loaded host).
  const ProcessRun one = run_processes(pts[6], 1, 3);
  EXPECT_GT(one.wall_s, 0);
  EXPECT_EQ(one.steady_passes, 3);
  EXPECT_GT(one.steady_pass_s, 0);
  EXPECT_LE(one.steady_pass_s, one.wall_s);
  const ProcessRun two = run_processes(pts[6], 2, 3);
  EXPECT_GT(two.wall_s, 0);
  EXPECT_LE(two.steady_passes, 6);
  EXPECT_LE(two.steady_pass_s, two.wall_s);
  EXPECT_EQ(two.steady_passes > 0, two.steady_pass_s > 0);
}

}  // namespace
}  // namespace dtrain::plan

namespace dtrain::plan {
namespace {

TEST(CalibrateUnits, SlowdownIsMeasuredAtEveryPowerOfTwoUpToTheCores) {
  // On 2 cores the curve stays 1, 2, 4; a many-core host gets the points between 1 and its
  // cores, where a straight line from 1 to 16 missed two processes' 1.3x.
  EXPECT_EQ(slowdown_process_counts(1), (std::vector<int>{2}));
  EXPECT_EQ(slowdown_process_counts(2), (std::vector<int>{2, 4}));
  EXPECT_EQ(slowdown_process_counts(6), (std::vector<int>{2, 4, 6, 12}));
  EXPECT_EQ(slowdown_process_counts(16), (std::vector<int>{2, 4, 8, 16, 32}));
}

TEST(CalibrateUnits, ACurveMeasuredOnBusyCoresIsWarnedAbout) {
  EXPECT_EQ(slowdown_warning({{1, 1.0}, {2, 1.08}, {4, 2.17}}, 2), "");  // beyond the cores: sharing, not a warning
  const std::string w = slowdown_warning({{1, 1.0}, {2, 1.55}, {4, 3.15}}, 2);
  EXPECT_NE(w.find("2 processes ran 1.55x slower than one on 2 cores"), std::string::npos) << w;
  EXPECT_NE(w.find("--slowdown-only"), std::string::npos) << w;
  // Many processes on a free many-core host slow down too: only the pair is judged.
  EXPECT_EQ(slowdown_warning({{1, 1.0}, {2, 1.1}, {4, 1.29}, {8, 1.28}, {16, 1.72}, {32, 3.0}}, 16), "");
  EXPECT_NE(slowdown_warning({{1, 1.0}, {2, 1.4}, {4, 1.5}, {8, 1.6}, {16, 1.7}, {32, 3.0}}, 16), "");
  EXPECT_EQ(slowdown_warning({{1, 1.0}, {2, 2.0}}, 1), "");  // one core: two processes share it
}

TEST(CalibrateUnits, CrossCoreHandoffIsTimedAndReadBack) {
  const CacheHandoff h = measure_handoff(int64_t{256} << 10, 11, 0);
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one CPU: no second core to hand lines to";
  ASSERT_TRUE(h.measured);
  // Every round is filed under the verdict its round trip gave, and only verdicts seen appear.
  int filed = 0;
  for (const auto& [verdict, r] : h.by_cores) {
    EXPECT_TRUE(verdict == "close" || verdict == "far") << verdict;
    EXPECT_GT(r.rounds, 0) << verdict;
    EXPECT_GE(r.write_after_read_s_per_byte, 0.0);
    filed += r.rounds;
  }
  EXPECT_EQ(filed, 11);
  EXPECT_EQ(h.bytes, int64_t{256} << 10);
  EXPECT_GE(h.write_after_read_s_per_byte, 0.0);
  EXPECT_GE(h.read_after_write_s_per_byte, 0.0);
  EXPECT_LT(h.write_after_read_s_per_byte, 1e-6);  // under a microsecond a byte: a hand-off, not a hang
  EXPECT_LT(h.read_after_write_s_per_byte, 1e-6);
  EXPECT_GE(h.store_after_read_s_per_byte, 0.0);
  EXPECT_LT(h.store_after_read_s_per_byte, 1e-6);
  // The compute section carries it; the cluster reads it back (ns -> s), and a file without
  // it leaves the rates unmeasured (< 0).
  nlohmann::json j = {{"version", 3},
                      {"compute",
                       {{"gemm_gflops", 20}, {"elementwise_gbps", 5}, {"optimizer_ns_per_param", 3},
                        {"handoff", handoff_json({true, 2e-10, 4e-10, 3e-11, 1 << 20, {{"far", {4e-10, 1e-11, 6e-11, 5}}}})}}}};
  TmpFile f = write_tmp(j);
  EXPECT_NEAR(this_machine(f).handoff_write_s_per_byte, 2e-10, 1e-18);
  EXPECT_NEAR(this_machine(f).handoff_read_s_per_byte, 4e-10, 1e-18);
  EXPECT_NEAR(this_machine(f).handoff_store_s_per_byte, 3e-11, 1e-18);
  EXPECT_NEAR(this_machine(f).handoff_overwrite_s_per_byte(), 3e-11, 1e-18);  // what ps's writes pay
  // A run whose cores probed far takes the far rounds' rates; one that probed close keeps
  // the mixed ones, since the calibration saw no close round.
  bool used = false;
  const Cluster far = with_core_distance(this_machine(f), true, &used);
  EXPECT_TRUE(used);
  EXPECT_NEAR(far.handoff_write_s_per_byte, 4e-10, 1e-18);
  EXPECT_NEAR(far.handoff_read_s_per_byte, 1e-11, 1e-18);
  EXPECT_NEAR(far.handoff_store_s_per_byte, 6e-11, 1e-18);
  EXPECT_NEAR(with_core_distance(this_machine(f), false, &used).handoff_write_s_per_byte, 2e-10, 1e-18);
  EXPECT_FALSE(used);
  j["compute"]["handoff"]["by_cores"] = {{"near", {{"write_after_read_ns_per_byte", 1}, {"read_after_write_ns_per_byte", 1}}}};
  std::ofstream(f) << j.dump();
  EXPECT_THROW(this_machine(f), InvalidArgument);
  // A file from before the store rate: none, and an overwrite costs the rewrite's rate.
  j["compute"]["handoff"] = {{"write_after_read_ns_per_byte", 0.2}, {"read_after_write_ns_per_byte", 0.4}};
  std::ofstream(f) << j.dump();
  EXPECT_LT(this_machine(f).handoff_store_s_per_byte, 0.0);
  EXPECT_NEAR(this_machine(f).handoff_overwrite_s_per_byte(), 2e-10, 1e-18);
  j["compute"].erase("handoff");
  std::ofstream(f) << j.dump();
  EXPECT_LT(this_machine(f).handoff_write_s_per_byte, 0.0);
  j["compute"]["handoff"] = {{"write_after_read_ns_per_byte", -1}, {"read_after_write_ns_per_byte", 0.1}};
  std::ofstream(f) << j.dump();
  EXPECT_THROW(this_machine(f), InvalidArgument);
}

// Gossip's mix, timed as two ranks run it (plan/calibrate_mix.h): a point per size, in the
// simulator's measure (4 model-sizes of traffic per mix); the calibration file carries it and
// the cluster reads it back, interpolated by size; a file without it prices at the
// element-wise rate; bad points are refused.
TEST(CalibrateUnits, GossipMixIsTimedAndReadBack) {
  if (std::thread::hardware_concurrency() < 2) {
    EXPECT_TRUE(measure_mix({int64_t{64} << 10}, 0.01).all.empty());
    GTEST_SKIP() << "one CPU: the mix is timed on two";
  }
  const MixRates rates = measure_mix({int64_t{64} << 10, int64_t{1} << 20}, 0.05);
  const auto& pts = rates.all;
  ASSERT_EQ(pts.size(), 2u);
  for (const auto& [verdict, by] : rates.by_cores) {  // only verdicts that every size saw
    EXPECT_TRUE(verdict == "close" || verdict == "far") << verdict;
    ASSERT_EQ(by.size(), 2u) << verdict;
    EXPECT_EQ(by[1].first, pts[1].first);
  }
  EXPECT_EQ(pts[0].first, 64.0 * 1024);
  EXPECT_EQ(pts[1].first, 1024.0 * 1024);
  for (const auto& [bytes, bps] : pts) {
    EXPECT_GT(bps, 1e8) << bytes;   // above 0.1 GB/s: a mix of 1 MiB in under 40 ms
    EXPECT_LT(bps, 1e13) << bytes;  // and not a mix that did nothing
  }
  nlohmann::json j = {{"version", 3},
                      {"compute",
                       {{"gemm_gflops", 20}, {"elementwise_gbps", 5}, {"optimizer_ns_per_param", 3},
                        {"mix_gbps_by_size", mix_json({{1 << 20, 20e9}, {16 << 20, 10e9}})}}}};
  TmpFile f = write_tmp(j);
  const Cluster c = this_machine(f);
  EXPECT_NEAR(c.mix_bps(1 << 20), 20e9, 1e3);
  EXPECT_NEAR(c.mix_bps(16 << 20), 10e9, 1e3);
  EXPECT_NEAR(c.mix_bps(64 << 10), 20e9, 1e3);   // flat beyond the ends
  EXPECT_NEAR(c.mix_bps(256 << 20), 10e9, 1e3);
  EXPECT_NEAR(1 / c.mix_bps(4 << 20), (1 / 20e9 + 1 / 10e9) / 2, 1e-15);  // halfway in log(size)
  // A pace of 2 (the machine at half speed) halves it; a cluster file carries it through.
  EXPECT_NEAR(at_compute_pace(c, 2).mix_bps(1 << 20), 10e9, 1e3);
  EXPECT_NEAR(cluster_from_json(cluster_to_json(c), "round trip").mix_bps(4 << 20), c.mix_bps(4 << 20), 1e3);
  // By the cores' distance: a run that probed close takes the close rounds' points, scaled by
  // the pace like the rest, and a cluster file carries them through.
  j["compute"]["mix_gbps_by_cores"] = mix_by_cores_json({{"close", {{1 << 20, 40e9}}}});
  std::ofstream(f) << j.dump();
  const Cluster by = this_machine(f);
  EXPECT_NEAR(with_core_distance(by, false).mix_bps(4 << 20), 40e9, 1e3);
  EXPECT_NEAR(with_core_distance(by, true).mix_bps(1 << 20), 20e9, 1e3);  // no far rounds: the mixed points
  EXPECT_NEAR(with_core_distance(at_compute_pace(by, 2), false).mix_bps(1 << 20), 20e9, 1e3);
  EXPECT_NEAR(with_core_distance(cluster_from_json(cluster_to_json(by), "round trip"), false).mix_bps(1 << 20), 40e9, 1e3);
  j["compute"]["mix_gbps_by_cores"] = {{"close", {{1 << 20, 0}}}};
  std::ofstream(f) << j.dump();
  EXPECT_THROW(this_machine(f), InvalidArgument);
  j["compute"].erase("mix_gbps_by_cores");
  j["compute"].erase("mix_gbps_by_size");
  std::ofstream(f) << j.dump();
  EXPECT_NEAR(this_machine(f).mix_bps(1 << 20), 5e9, 1e3);
  j["compute"]["mix_gbps_by_size"] = {{1 << 20, 20}, {1 << 19, 10}};  // sizes must increase
  std::ofstream(f) << j.dump();
  EXPECT_THROW(this_machine(f), InvalidArgument);
  j["compute"]["mix_gbps_by_size"] = {{1 << 20, 0}};
  std::ofstream(f) << j.dump();
  EXPECT_THROW(this_machine(f), InvalidArgument);
}

TEST(CalibrateUnits, SharedMixIsTimedApartAndPricesTheCompleteGraph) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one CPU: the mix is timed on two";
  const MixRates rates = measure_mix({int64_t{256} << 10}, 0.05);
  ASSERT_EQ(rates.shared.size(), 1u);
  EXPECT_EQ(rates.shared[0].first, 256.0 * 1024);
  EXPECT_GT(rates.shared[0].second, 1e8);  // half a mix of 256 KiB in under 5 ms
  EXPECT_LT(rates.shared[0].second, 1e13);
  for (const auto& [verdict, by] : rates.shared_by_cores) EXPECT_TRUE(verdict == "close" || verdict == "far") << verdict;
  // Read back, by verdict, through a cluster file; absent, the whole mix's rate stands in.
  nlohmann::json j = {{"version", 3},
                      {"compute",
                       {{"gemm_gflops", 20}, {"elementwise_gbps", 5}, {"optimizer_ns_per_param", 3},
                        {"mix_gbps_by_size", mix_json({{1 << 20, 20e9}})},
                        {"mix_shared_gbps_by_size", mix_json({{1 << 20, 12e9}})},
                        {"mix_shared_gbps_by_cores", mix_by_cores_json({{"far", {{1 << 20, 9e9}}}})}}}};
  TmpFile f = write_tmp(j);
  const Cluster c = this_machine(f);
  EXPECT_NEAR(c.mix_shared_bps(1 << 20), 12e9, 1e3);
  EXPECT_NEAR(c.mix_bps(1 << 20), 20e9, 1e3);
  EXPECT_NEAR(with_core_distance(c, true).mix_shared_bps(1 << 20), 9e9, 1e3);
  EXPECT_NEAR(with_core_distance(c, false).mix_shared_bps(1 << 20), 12e9, 1e3);  // no close rounds
  EXPECT_NEAR(at_compute_pace(c, 2).mix_shared_bps(1 << 20), 6e9, 1e3);
  EXPECT_NEAR(with_core_distance(cluster_from_json(cluster_to_json(c), "round trip"), true).mix_shared_bps(1 << 20), 9e9,
              1e3);
  // Gossip at 2 ranks (a complete graph) is priced with the shared rate; at 4 (a ring) not.
  const ModelSpec mlp = ModelSpec::parse("mlp:784-256-256-10");
  Layout l;
  l.strategy = "gossip";
  l.dp = 2;
  Cluster slow = c, fast = c;
  slow.mix_shared_points = {{1 << 20, 1 / 1e9}};
  fast.mix_shared_points = {{1 << 20, 1 / 100e9}};
  EXPECT_GT(simulate(mlp, l, slow, 64).comm_s, simulate(mlp, l, fast, 64).comm_s);
  l.dp = 4;
  EXPECT_NEAR(simulate(mlp, l, slow, 64).comm_s, simulate(mlp, l, fast, 64).comm_s, 1e-12);
  j["compute"]["mix_shared_gbps_by_cores"] = {{"near", {{1 << 20, 9}}}};
  std::ofstream(f) << j.dump();
  EXPECT_THROW(this_machine(f), InvalidArgument);
}

TEST(CalibrateUnits, SlowdownCurveIsInterpolated) {
  Cluster c;
  c.cores_per_node = 2;
  c.slowdown = {{1, 1.0}, {2, 1.5}, {4, 3.5}};
  EXPECT_DOUBLE_EQ(c.compute_slowdown(1), 1.0);
  EXPECT_DOUBLE_EQ(c.compute_slowdown(2), 1.5);  // hyperthreads: slower already at ranks = cores
  EXPECT_DOUBLE_EQ(c.compute_slowdown(3), 2.5);
  EXPECT_DOUBLE_EQ(c.compute_slowdown(8), 7.0);  // beyond the last point: its slowdown per rank
  // Never below time sharing's r / cores: a curve whose single process ran slow.
  c.slowdown = {{1, 1.0}, {2, 1.02}, {4, 1.76}};
  EXPECT_DOUBLE_EQ(c.compute_slowdown(2), 1.02);
  EXPECT_DOUBLE_EQ(c.compute_slowdown(4), 2.0);
  EXPECT_DOUBLE_EQ(c.compute_slowdown(3), 1.5);
  EXPECT_DOUBLE_EQ(c.compute_slowdown(8), 4.0);
  c.slowdown.clear();
  c.oversub_penalty = 1.2;
  EXPECT_DOUBLE_EQ(c.compute_slowdown(2), 1.0);
  EXPECT_DOUBLE_EQ(c.compute_slowdown(4), 2.4);
  // From a calibration file; a decreasing rank count is refused.
  nlohmann::json j = {{"version", 3},
                      {"compute",
                       {{"gemm_gflops", 20}, {"elementwise_gbps", 5}, {"optimizer_ns_per_param", 3},
                        {"slowdown", {{1, 1.0}, {2, 1.25}}}}}};
  TmpFile f = write_tmp(j);
  EXPECT_DOUBLE_EQ(this_machine(f).compute_slowdown(2), 1.25);
  j["compute"]["slowdown"] = {{2, 1.0}, {1, 1.0}};
  std::ofstream(f) << j.dump();
  EXPECT_THROW(this_machine(f), InvalidArgument);
}

}  // namespace
}  // namespace dtrain::plan
