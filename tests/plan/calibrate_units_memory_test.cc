// Unit calibration's memory fit (plan/calibrate_units.h fit_units): heap bytes per element of
// a unit's memory basis across widths, and a block's attention probabilities apart from the
// rest where the timed widths tell them apart; the figures through the file and back.
#include "plan/calibrate_units.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "plan/simulator.h"

namespace dtrain::plan {
namespace {

TEST(CalibrateUnits, MemoryIsFittedPerElementAcrossWidths) {
  // Blocks of widths 64 and 128 keeping exactly 5 bytes per element of their memory basis
  // (mem_elems: closed-form activations + output), high-water 8: the per-element fit recovers
  // 5 and 8 for both widths, where one bytes-per-item slope cannot fit both.
  const char* narrow = "gpt:layers=1,heads=4,width=64,context=64";
  const char* wide = "gpt:layers=1,heads=8,width=128,context=64";
  std::vector<UnitPoint> pts;
  for (const char* spec : {narrow, wide})
    for (int64_t items : {2, 6, 12}) {
      const double e = static_cast<double>(items) * mem_elems(ModelSpec::parse(spec).units[1]);
      pts.push_back({"gpt_block", spec, 1, items, 1, 1e-6, 1e-6, 5 * e, 8 * e});
    }
  UnitCost c = fit_units(pts)["gpt_block"];
  EXPECT_NEAR(c.act_b_per_elem, 5, 1e-9);
  EXPECT_NEAR(c.peak_b_per_elem, 8, 1e-9);
  const double wide_elems = mem_elems(ModelSpec::parse(wide).units[1]);
  EXPECT_NEAR(c.act_b(wide_elems), 5 * wide_elems, 1e-6);
  EXPECT_LT(c.act_b_per_item, 5 * wide_elems);  // the per-item slope under-counts the wide block
  auto back = units_from_json(units_json(pts, {{"gpt_block", c}}), "test");
  EXPECT_NEAR(back["gpt_block"].peak_b_per_elem, 8, 1e-9);
  // A file without the per-element figures falls back to per item.
  UnitCost old;
  old.act_b_per_item = 7;
  EXPECT_DOUBLE_EQ(old.act_b(wide_elems), 7);
}

TEST(CalibrateUnits, AttentionProbabilitiesAreFittedApartWhereTheWidthsTellThemApart) {
  // Blocks keeping 5 bytes per element of their memory basis outside the attention
  // probabilities and 4 per probability (high-water 9 and 4): widths 64, 128 and 256 hold
  // heads x context / width 4, 4 and 2, so the fit tells the two apart, and prices a block
  // at context 256 (ratio 16) exactly, where one figure per element would over-count it.
  const std::vector<const char*> specs = {"gpt:layers=1,heads=4,width=64,context=64", "gpt:layers=1,heads=8,width=128,context=64",
                                          "gpt:layers=1,heads=8,width=256,context=64"};
  auto bytes = [](const Unit& u, double rest, double per_score) {
    return rest * (mem_elems(u) - u.score_elems) + per_score * u.score_elems;
  };
  std::vector<UnitPoint> pts;
  for (const char* spec : specs)
    for (int64_t items : {2, 6}) {
      const Unit u = ModelSpec::parse(spec).units[1];
      const double n = static_cast<double>(items);
      pts.push_back({"gpt_block", spec, 1, items, 1, 1e-6, 1e-6, n * bytes(u, 5, 4), n * bytes(u, 9, 4)});
      pts.push_back({kZero3Block, spec, 1, items, 1, 1e-6, 1e-6, 0, n * bytes(u, 9, 4)});
    }
  auto fits = fit_units(pts);
  const UnitCost& c = fits["gpt_block"];
  EXPECT_NEAR(c.act_b_per_elem, 5, 1e-6);
  EXPECT_NEAR(c.act_b_per_score, 4, 1e-6);
  EXPECT_NEAR(c.peak_b_per_elem, 9, 1e-6);
  EXPECT_NEAR(c.peak_b_per_score, 4, 1e-6);
  // ZeRO-3's block keeps nothing between passes: its high-water mark is fitted apart alone.
  EXPECT_EQ(fits[kZero3Block].act_b_per_elem, 0);
  EXPECT_NEAR(fits[kZero3Block].peak_b_per_score, 4, 1e-6);
  const Unit longer = ModelSpec::parse("gpt:layers=1,heads=8,width=128,context=256").units[1];
  EXPECT_GT(longer.score_elems, 0);
  EXPECT_NEAR(c.act_b(mem_elems(longer), longer.score_elems), bytes(longer, 5, 4), 1e-6);
  UnitCost one;
  one.act_b_per_elem = 5.1;
  EXPECT_GT(one.act_b(mem_elems(longer), longer.score_elems), 1.05 * bytes(longer, 5, 4));
  // The file keeps both figures.
  auto back = units_from_json(units_json(pts, fits), "test");
  EXPECT_NEAR(back["gpt_block"].act_b_per_score, 4, 1e-6);
  EXPECT_NEAR(back["gpt_block"].peak_b_per_elem, 9, 1e-6);
  // One shape alone cannot tell them apart: its own line keeps one figure per element.
  std::vector<UnitPoint> alone(pts.begin(), pts.begin() + 4);
  auto alone_fits = fit_units(alone);
  const UnitCost& own = alone_fits["gpt_block"];
  EXPECT_EQ(own.act_b_per_score, 0);
  EXPECT_GT(own.act_b_per_elem, 4);  // a blend of the two, exact for that shape
  EXPECT_LT(own.act_b_per_elem, 5);
}

}  // namespace
}  // namespace dtrain::plan
