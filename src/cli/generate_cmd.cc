#include "base/error.h"
#include "cli/commands.h"

namespace dtrain::cli {
int generate_main(const Args&) { DT_THROW(Error, "'dtrain generate' is not built yet"); }
}  // namespace dtrain::cli
