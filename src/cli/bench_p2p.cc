#include "base/error.h"
#include "cli/bench.h"

namespace dtrain::cli {
int bench_p2p(const Args&) { DT_THROW(Error, "'dtrain bench p2p' is not built yet"); }
}  // namespace dtrain::cli
