#include "comm/pmix_exchange.h"

#include <cstring>

#include "base/env.h"
#include "base/error.h"

#ifdef DTRAIN_HAVE_PMIX
#include <pmix.h>
#endif

namespace dtrain {

bool pmix_in_env() { return env_get("PMIX_RANK").has_value() && env_get("PMIX_NAMESPACE").has_value(); }

#ifdef DTRAIN_HAVE_PMIX

bool pmix_built() { return true; }

namespace {

constexpr const char* kKey = "dtrain.rendezvous";

// Finalises PMIx when the exchange leaves, by any path.
struct PmixSession {
  pmix_proc_t me;
  PmixSession() {
    std::memset(&me, 0, sizeof me);
    const pmix_status_t rc = PMIx_Init(&me, nullptr, 0);
    DT_CHECK(rc == PMIX_SUCCESS, IoError,
             "PMIx_Init failed (" << PMIx_Error_string(rc) << "): the PMIx server of srun/mpirun is unreachable; "
                                  << "start the job with 'srun --mpi=pmix' or OpenMPI's mpirun, or set DTRAIN_STORE");
  }
  ~PmixSession() { PMIx_Finalize(nullptr, 0); }
};

}  // namespace

std::string pmix_share_from_rank0(int rank, const std::string& value, double timeout_s) {
  PmixSession s;
  const int my = static_cast<int>(s.me.rank);
  DT_CHECK(my == rank, InvalidArgument,
           "PMIx says this process is rank " << my << " of namespace " << s.me.nspace << " but the environment says rank "
                                             << rank << "; do not mix launchers (e.g. dtrain run inside srun)");
  if (rank == 0) {
    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_STRING;
    v.data.string = const_cast<char*>(value.c_str());
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, kKey, &v);
    DT_CHECK(rc == PMIX_SUCCESS, IoError, "rank 0: PMIx_Put(" << kKey << ") failed: " << PMIx_Error_string(rc));
    rc = PMIx_Commit();
    DT_CHECK(rc == PMIX_SUCCESS, IoError, "rank 0: PMIx_Commit failed: " << PMIx_Error_string(rc));
  }
  pmix_proc_t all;
  PMIX_PROC_CONSTRUCT(&all);
  PMIX_LOAD_PROCID(&all, s.me.nspace, PMIX_RANK_WILDCARD);
  pmix_info_t info[2];
  bool collect = true;
  int secs = static_cast<int>(timeout_s < 1 ? 1 : timeout_s);
  PMIX_INFO_CONSTRUCT(&info[0]);
  PMIX_INFO_CONSTRUCT(&info[1]);
  PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &secs, PMIX_INT);
  pmix_status_t rc = PMIx_Fence(&all, 1, info, 2);
  PMIX_INFO_DESTRUCT(&info[0]);
  PMIX_INFO_DESTRUCT(&info[1]);
  if (rc == PMIX_ERR_TIMEOUT)
    DT_THROW(Timeout, "rank " << rank << ": PMIx fence of namespace " << s.me.nspace << " timed out after " << secs
                              << " s: some rank of the job never started or cannot reach the PMIx server");
  DT_CHECK(rc == PMIX_SUCCESS, IoError, "rank " << rank << ": PMIx_Fence failed: " << PMIx_Error_string(rc));
  if (rank == 0) return value;
  pmix_proc_t zero;
  PMIX_PROC_CONSTRUCT(&zero);
  PMIX_LOAD_PROCID(&zero, s.me.nspace, 0);
  pmix_value_t* got = nullptr;
  rc = PMIx_Get(&zero, kKey, nullptr, 0, &got);
  DT_CHECK(rc == PMIX_SUCCESS && got && got->type == PMIX_STRING, IoError,
           "rank " << rank << ": PMIx_Get(" << kKey << " of rank 0) failed: " << PMIx_Error_string(rc)
                   << " (rank 0 did not publish its store: is it a dtrain rank of this job?)");
  std::string out = got->data.string;
  PMIX_VALUE_RELEASE(got);
  return out;
}

#else

bool pmix_built() { return false; }

std::string pmix_share_from_rank0(int, const std::string&, double) {
  DT_THROW(InvalidArgument, "dtrain was built without PMIx: install libpmix-dev and rebuild (scripts/build.sh), "
                            "or set MASTER_ADDR, MASTER_PORT and DTRAIN_TOKEN on every rank");
}

#endif

}  // namespace dtrain
