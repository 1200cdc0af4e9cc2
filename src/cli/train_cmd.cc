#include "base/error.h"
#include "cli/commands.h"

namespace dtrain::cli {
int train_main(const Args&) { DT_THROW(Error, "'dtrain train' is not built yet"); }
}  // namespace dtrain::cli
