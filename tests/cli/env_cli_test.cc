// dtrain env and dtrain data, run as the user runs them: the values in force with where they
// come from, a malformed value flagged instead of failing, the Markdown table, and the named
// datasets with where each was looked for and how to obtain it; dtrain --version.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "base/huge_pages.h"
#include "support/subprocess.h"

namespace dtrain {
namespace {

using testing::env_path;
using testing::run_command;

class EnvCli : public ::testing::Test {
 protected:
  void SetUp() override {
    bin_ = env_path("DTRAIN_BIN");
    if (bin_.empty()) GTEST_SKIP() << "DTRAIN_BIN not set";
  }
  std::string bin_;
};

TEST_F(EnvCli, PrintsEverySettingWithTheValueInForce) {
  auto r = run_command("env -u DTRAIN_TRANSPORT DTRAIN_TIMEOUT=7 DTRAIN_SHM_RING_BYTES=lots " + bin_ + " env");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("DTRAIN_TIMEOUT             7  (set)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("DTRAIN_TRANSPORT           auto\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("DTRAIN_SHM_RING_BYTES      lots  (set, INVALID"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("DTRAIN_DATA_DIR"), std::string::npos) << r.output;
}

TEST_F(EnvCli, MarkdownIsTheDocsTable) {
  // stdout alone: a CPU whose OpenBLAS needs OPENBLAS_CORETYPE gets a notice on stderr first.
  auto r = run_command(bin_ + " env --markdown 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("| variable | type | default | meaning | read by |", 0), 0u) << r.output;
  auto bad = run_command(bin_ + " env --bogus");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
}

TEST_F(EnvCli, VersionNamesTheBuildAndTheKernelsInForce) {
  auto r = run_command(bin_ + " --version 2>/dev/null");  // stdout alone, as above
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("dtrain ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find(", revision "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("BLAS:"), std::string::npos) << r.output;
  // The JSON form carries the same, and the kernels follow DTRAIN_ISA's cap.
  auto j = run_command("DTRAIN_ISA=generic " + bin_ + " version --json 2>/dev/null");
  ASSERT_EQ(j.exit_code, 0) << j.output;
  const auto v = nlohmann::json::parse(j.output, nullptr, false);
  ASSERT_TRUE(v.is_object()) << j.output;
  EXPECT_EQ(v.value("kernels", ""), "generic") << j.output;
  EXPECT_FALSE(v.value("revision", "").empty()) << j.output;
  EXPECT_EQ(r.output.rfind("dtrain " + v.value("version", "?") + ", revision " + v.value("revision", "?"), 0), 0u)
      << r.output << j.output;
  EXPECT_GE(v.value("cores_online", 0), 1) << j.output;
  // The kernel's huge-page settings, as this process reads them, and the way to shared
  // memory's huge pages exactly where the kernel refuses them.
  EXPECT_EQ(v.value("huge_pages", ""), transparent_huge_pages_mode()) << j.output;
  const std::string shared = shared_huge_pages_mode();
  EXPECT_EQ(v.value("shared_huge_pages", ""), shared) << j.output;
  EXPECT_NE(r.output.find("(shmem THP " + shared + ")"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("echo advise > /sys/kernel/mm/transparent_hugepage/shmem_enabled") != std::string::npos,
            huge_pages_wanted() && shared == "never")
      << r.output;
  auto bad = run_command(bin_ + " version --bogus");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
}

TEST_F(EnvCli, DataListsTheNamedDatasetsAndHowToObtainThem) {
  auto r = run_command("DTRAIN_DATA_DIR=/nonexistent/dtrain-data " + bin_ + " data");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("data directory: /nonexistent/dtrain-data"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("looked for /nonexistent/dtrain-data/a9a/a9a.gz"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("looked for /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"),
            std::string::npos)
      << r.output;
  // Where the Debian package is installed (scripts/main.sh installs it) the dataset is found;
  // elsewhere the listing says how to get it.
  const bool packaged = r.output.find("fashion-mnist    found in /usr/share/datasets/fashion-mnist") != std::string::npos;
  if (!packaged) {
    EXPECT_NE(r.output.find("apt-get install dataset-fashion-mnist"), std::string::npos) << r.output;
  }
  for (const char* name : {"mnist", "a9a", "w8a", "news20", "tinyshakespeare"})
    EXPECT_NE(r.output.find(std::string(name) + " "), std::string::npos) << name << "\n" << r.output;
}

TEST_F(EnvCli, DataFindsTheTestSuitesDataDirectory) {
  // The suite's DTRAIN_DATA_DIR (../shared/data) when it has a9a; a user's clone skips.
  auto r = run_command(bin_ + " data");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  if (r.output.find("a9a              found in") == std::string::npos)
    GTEST_SKIP() << "a9a is not in the data directory here:\n" << r.output;
  auto t = run_command(bin_ + " train --strategy single --model logreg --data a9a --epochs 1 --quiet");
  EXPECT_EQ(t.exit_code, 0) << t.output;
}

}  // namespace
}  // namespace dtrain
