#include "base/error.h"
#include "cli/bench.h"

namespace dtrain::cli {
int bench_calibrate(const Args&) { DT_THROW(Error, "'dtrain bench calibrate' is not built yet"); }
}  // namespace dtrain::cli
