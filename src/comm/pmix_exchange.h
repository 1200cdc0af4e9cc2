// comm/pmix_exchange.h — one string from rank 0 to every rank through the engine's PMIx
// server (srun --mpi=pmix, OpenMPI's mpirun): how ranks started by an engine find the store
// rank 0 serves, with no address, port or token set by hand.
//
// Contract
// - pmix_built(): dtrain was built with PMIx (libpmix-dev found by CMake).
// - pmix_in_env(): this process was started by a PMIx server (PMIX_RANK and PMIX_NAMESPACE
//   are set), so pmix_share_from_rank0 can be called.
// - pmix_share_from_rank0(value, timeout_s): collective over every process of the PMIx
//   namespace (the job's ranks). Rank 0's `value` is published (PMIx_Put + Commit), every rank
//   takes part in one fence bounded by timeout_s, and every rank returns rank 0's value (rank 0
//   its own). PMIx is initialised and finalised inside the call. An engine failure, or a rank
//   missing from the fence past the timeout, is an IoError / Timeout naming the PMIx call and
//   status; without PMIx built it is an InvalidArgument saying how to build it.
// Thread-safety: call from one thread, once per job.
#pragma once

#include <string>

namespace dtrain {

bool pmix_built();
bool pmix_in_env();
std::string pmix_share_from_rank0(int rank, const std::string& value, double timeout_s);

}  // namespace dtrain
