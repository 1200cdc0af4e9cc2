#include "base/error.h"
#include "cli/commands.h"

namespace dtrain::cli {
int bench_main(const Args&) { DT_THROW(Error, "'dtrain bench' is not built yet"); }
}  // namespace dtrain::cli
