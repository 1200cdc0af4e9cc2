#include "base/error.h"
#include "cli/commands.h"

namespace dtrain::cli {
int plan_main(const Args&) { DT_THROW(Error, "'dtrain plan' is not built yet"); }
}  // namespace dtrain::cli
