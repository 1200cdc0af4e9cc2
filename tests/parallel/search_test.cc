// Search trials: grid parsing (cartesian product, errors that name the bad part), seeded
// random trials, round-robin placement, width substitution.
#include <gtest/gtest.h>

#include "base/error.h"
#include "parallel/search.h"

namespace dtrain {
namespace {

TEST(SearchGrid, CartesianProductFirstKeySlowest) {
  auto t = parse_search_grid("lr=0.1,0.03;batch=64,256");
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].lr, 0.1);
  EXPECT_EQ(t[0].batch, 64);
  EXPECT_EQ(t[1].lr, 0.1);
  EXPECT_EQ(t[1].batch, 256);
  EXPECT_EQ(t[3].lr, 0.03);
  EXPECT_EQ(t[3].momentum, -1);  // unset: the run's value
  EXPECT_EQ(t[2].describe(), "lr=0.03 batch=64");
  EXPECT_EQ(parse_search_grid("momentum=0,0.9;width=64,128,256").size(), 6u);
}

TEST(SearchGrid, MalformedSpecsSayWhatIsWrong) {
  auto msg = [](const std::string& spec) {
    try {
      parse_search_grid(spec);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg("depth=3").find("unknown key 'depth'"), std::string::npos);
  EXPECT_NE(msg("lr=fast").find("'fast' is not a number"), std::string::npos);
  EXPECT_NE(msg("lr").find("key=v1,v2"), std::string::npos);
  EXPECT_NE(msg("batch=12.5").find("positive integer"), std::string::npos);
  EXPECT_NE(msg("momentum=1.5").find("[0, 1)"), std::string::npos);
  EXPECT_NE(msg("").find("needs a grid"), std::string::npos);
}

TEST(SearchRandom, SeededAndInRange) {
  auto a = random_trials(20, 5), b = random_trials(20, 5), c = random_trials(20, 6);
  ASSERT_EQ(a.size(), 20u);
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].lr, b[i].lr);
    differs |= a[i].lr != c[i].lr;
    EXPECT_GE(a[i].lr, 1e-3);
    EXPECT_LE(a[i].lr, 0.3);
    EXPECT_GT(a[i].batch, 0);
    EXPECT_GT(a[i].width, 0);
  }
  EXPECT_TRUE(differs);
}

TEST(SearchPlacement, RoundRobinAndWidth) {
  EXPECT_EQ(trials_of_rank(7, 0, 3), (std::vector<int64_t>{0, 3, 6}));
  EXPECT_EQ(trials_of_rank(7, 2, 3), (std::vector<int64_t>{2, 5}));
  EXPECT_TRUE(trials_of_rank(1, 1, 2).empty());
  EXPECT_EQ(apply_width("784-256-128-10", 64), "784-64-64-10");
  EXPECT_EQ(apply_width("784-10", 64), "784-10");
}

}  // namespace
}  // namespace dtrain
