#include "base/error.h"
#include "cli/bench.h"

namespace dtrain::cli {
int bench_collectives(const Args&) { DT_THROW(Error, "'dtrain bench collectives' is not built yet"); }
}  // namespace dtrain::cli
