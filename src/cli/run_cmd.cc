#include "base/error.h"
#include "cli/commands.h"

namespace dtrain::cli {
int run_main(const Args&) { DT_THROW(Error, "'dtrain run' is not built yet"); }
}  // namespace dtrain::cli
