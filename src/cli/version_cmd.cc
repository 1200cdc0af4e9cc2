// cli/version_cmd.cc — `dtrain --version` (also `dtrain version`): what this binary is.
//
// Contract: prints the release, the git revision it was built from (cmake/BuildInfo.cmake;
// "-dirty" when the tree had uncommitted changes, "unknown" outside a git checkout), the
// build type, compiler and sanitizers, the kernels in force (the widest ISA this CPU runs,
// capped by DTRAIN_ISA), the BLAS library and the cores it runs on, and whether PMIx was
// built in: what a bug report needs. `--json` prints the same as one JSON object. Exit 0.
#include <unistd.h>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flags.h"
#include "comm/pmix_exchange.h"
#include "dtrain_build_info.h"
#include "tensor/blas.h"
#include "tensor/cpu_features.h"

namespace dtrain::cli {

int version_main(const Args& args) {
  Flags f("version", args);
  const bool json = f.get_bool("json", "print one JSON object");
  if (f.help_requested()) {
    std::printf("%s", f.help_text("[--json]").c_str());
    return 0;
  }
  f.finish();
  const CpuFeatures& cpu = cpu_features();
  const char* widest = cpu.avx512 ? "avx512" : cpu.avx2_fma ? "avx2" : "generic";
  const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  nlohmann::json j = {{"version", DTRAIN_BUILD_VERSION},
                      {"revision", DTRAIN_BUILD_REVISION},
                      {"build_type", DTRAIN_BUILD_TYPE},
                      {"compiler", DTRAIN_BUILD_COMPILER},
                      {"sanitizers", DTRAIN_BUILD_SANITIZE},
                      {"kernels", isa_name(best_isa())},
                      {"cpu_runs", widest},
                      {"blas", blas_config()},
                      {"blas_core", blas_core()},
                      {"cores_online", cores},
                      {"pmix", pmix_built()}};
  if (json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("dtrain %s, revision %s\n", DTRAIN_BUILD_VERSION, DTRAIN_BUILD_REVISION);
  std::printf("build:   %s, %s, sanitizers %s\n", DTRAIN_BUILD_TYPE, DTRAIN_BUILD_COMPILER, DTRAIN_BUILD_SANITIZE);
  std::printf("kernels: %s (this CPU runs up to %s; DTRAIN_ISA caps it)\n", isa_name(best_isa()), widest);
  std::printf("BLAS:    %s, %s kernels\n", blas_config(), blas_core());
  std::printf("cores:   %ld online\n", cores);
  std::printf("PMIx:    %s\n", pmix_built() ? "built in (srun --mpi=pmix / mpirun jobs rendezvous through it)"
                                            : "not built in (apt-get install libpmix-dev, then build again)");
  return 0;
}

}  // namespace dtrain::cli
