// Linked into every test program: sets DTRAIN_BIN, DTRAIN_TEST_RANK and DTRAIN_DATA_DIR (the
// datasets: ../shared/data beside the source tree) to this build's paths unless the environment
// already has them (so tests started by hand or by ctest see the same values).
#include <cstdlib>

namespace {
struct TestEnvironment {
  TestEnvironment() {
    ::setenv("DTRAIN_BIN", DTRAIN_BIN_PATH, 0);
    ::setenv("DTRAIN_TEST_RANK", DTRAIN_TEST_RANK_PATH, 0);
    ::setenv("DTRAIN_DATA_DIR", DTRAIN_SHARED_DATA_PATH, 0);
  }
} test_environment;
}  // namespace
