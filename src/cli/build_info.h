// cli/build_info.h — what this binary is, as JSON: release, git revision, build type,
// compiler, sanitizers, kernels in force, BLAS, cores online, PMIx (cli/version_cmd.cc).
// `dtrain --version --json` prints it; `dtrain train --json` records it as "build", so a
// result file names the build that produced it.
#pragma once

#include <nlohmann/json.hpp>

namespace dtrain::cli {

nlohmann::json build_info();

}  // namespace dtrain::cli
