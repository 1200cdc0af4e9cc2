// cli/version_cmd.cc — `dtrain --version` (also `dtrain version`): what this binary is.
//
// Contract: prints the release, the git revision it was built from (cmake/BuildInfo.cmake;
// "-dirty" when the tree had uncommitted changes, "unknown" outside a git checkout), the
// build type, compiler and sanitizers, the kernels in force (the widest ISA this CPU runs,
// capped by DTRAIN_ISA), the BLAS library, its kernels' width and whether dtrain's own
// small-batch products therefore take every size, the cores it runs on, and whether PMIx was
// built in: what a bug report needs. `--json` prints the same as one JSON object (build_info(),
// which `dtrain train --json` records too). Exit 0.
#include <unistd.h>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "base/huge_pages.h"
#include "base/large_blocks.h"
#include "cli/build_info.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "comm/pmix_exchange.h"
#include "dtrain_build_info.h"
#include "tensor/blas.h"
#include "tensor/cpu_features.h"
#include "tensor/gemm_small.h"

namespace dtrain::cli {

nlohmann::json build_info() {
  Isa widest = Isa::kGeneric;  // what this CPU runs, uncapped
  for (Isa i : {Isa::kAvx2, Isa::kAvx512})
    if (isa_supported(i)) widest = i;
  return {{"version", DTRAIN_BUILD_VERSION},
          {"revision", DTRAIN_BUILD_REVISION},
          {"build_type", DTRAIN_BUILD_TYPE},
          {"compiler", DTRAIN_BUILD_COMPILER},
          {"sanitizers", DTRAIN_BUILD_SANITIZE},
          {"kernels", isa_name(best_isa())},
          {"cpu_runs", isa_name(widest)},
          {"blas", blas_config()},
          {"blas_core", blas_core()},
          {"blas_vector_bits", blas_vector_bits()},
          {"small_batch_products_every_size", gemm_small_every_size()},
          {"cores_online", ::sysconf(_SC_NPROCESSORS_ONLN)},
          {"huge_pages", transparent_huge_pages_mode()},
          {"shared_huge_pages", shared_huge_pages_mode()},
          {"pmix", pmix_built()}};
}

int version_main(const Args& args) {
  Flags f("version", args);
  const bool json = f.get_bool("json", "print one JSON object");
  if (f.help_requested()) {
    std::printf("%s", f.help_text("[--json]").c_str());
    return 0;
  }
  f.finish();
  const nlohmann::json j = build_info();
  if (json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  auto text = [&](const char* k) { return j[k].get<std::string>(); };
  std::printf("dtrain %s, revision %s\n", text("version").c_str(), text("revision").c_str());
  std::printf("build:   %s, %s, sanitizers %s\n", text("build_type").c_str(), text("compiler").c_str(),
              text("sanitizers").c_str());
  std::printf("kernels: %s (this CPU runs up to %s; DTRAIN_ISA caps it)\n", text("kernels").c_str(),
              text("cpu_runs").c_str());
  std::printf("BLAS:    %s, %s kernels (%d-bit vectors)\n", text("blas").c_str(), text("blas_core").c_str(),
              j["blas_vector_bits"].get<int>());
  std::printf("small-batch products: %s\n",
              j["small_batch_products_every_size"].get<bool>()
                  ? "dtrain's at every batch size (OpenBLAS's kernels are narrower than its own)"
                  : "dtrain's up to the batch where OpenBLAS's kernels of the same width win (tensor/gemm_small.h)");
  std::printf("cores:   %ld online\n", j["cores_online"].get<long>());
  // Buffers of 2 MiB and more (base/large_blocks.h) and the shared-memory windows are advised.
  const std::string thp = text("huge_pages"), shared = text("shared_huge_pages");
  const bool wanted = huge_pages_wanted();
  auto pages = [&](bool given) {
    return !wanted ? "in 4 KiB pages (DTRAIN_HUGE_PAGES=0)" : given ? "in 2 MiB pages" : "in 4 KiB pages";
  };
  std::printf("memory:  buffers of 2 MiB and more %s (THP %s); shared-memory windows %s (shmem THP %s)\n",
              pages(large_blocks_taken() && transparent_huge_pages_given(thp)), thp.c_str(),
              pages(shared_huge_pages_given(shared)), shared.c_str());
  if (wanted && shared == "never")
    std::printf("         as root, echo advise > /sys/kernel/mm/transparent_hugepage/shmem_enabled gives the windows "
                "2 MiB pages (ddp with 4 ranks on 2 cores 6%% faster here, docs/TRAINING.md)\n");
  std::printf("PMIx:    %s\n", j["pmix"].get<bool>() ? "built in (srun --mpi=pmix / mpirun jobs rendezvous through it)"
                                                     : "not built in (apt-get install libpmix-dev, then build again)");
  return 0;
}

}  // namespace dtrain::cli
