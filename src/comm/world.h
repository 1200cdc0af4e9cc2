// comm/world.h — who am I in the job: rank, size and rendezvous, read from the environment.
//
// Contract: world_from_env() reads the launcher's variables from the environment and the DTRAIN_*
// ones from a settings snapshot (base/settings.h), in order of precedence,
//   rank/size: RANK + WORLD_SIZE (dtrain run, torchrun), OMPI_COMM_WORLD_RANK/SIZE (mpirun),
//              PMI_RANK/PMI_SIZE, SLURM_PROCID/SLURM_NTASKS (srun); else a single process.
//   local:     LOCAL_RANK/LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK/SIZE, SLURM_LOCALID.
//   store:     DTRAIN_STORE (tcp://HOST:PORT or file:///DIR, set by dtrain run); else
//              MASTER_ADDR + MASTER_PORT, where rank 0 serves the store; else, for a job on
//              one host started by mpirun/srun, a private file store /tmp/dtrain-UID-JOB-STEP
//              (SLURM_JOB_ID or OMPI_MCA_ess_base_jobid, SLURM_STEP_ID or 0), one generation
//              per run, removed by the last rank (open_job_file_store in file_store.h); a
//              single process gets an in-memory store.
//   token:     DTRAIN_TOKEN (the launcher generates it). A TCP store needs it; its absence
//              is an InvalidArgument saying how to set it.
//   transport: DTRAIN_TRANSPORT (auto|shm|tcp), DTRAIN_TIMEOUT (seconds, default 300, for every
//              blocking call), DTRAIN_CONNECT_TIMEOUT (rendezvous; default DTRAIN_TIMEOUT),
//              DTRAIN_BIND_ADDR (address or interface name the tcp transport listens on and
//              publishes, default 127.0.0.1), DTRAIN_SHM_RING_BYTES, DTRAIN_SPIN_US,
//              DTRAIN_YIELD_US, DTRAIN_HOST_ID; LOCAL_WORLD_SIZE tells it whether ranks
//              outnumber the cores.
// A malformed value is an InvalidArgument naming the variable.
#pragma once

#include <memory>
#include <string>

#include "base/settings.h"
#include "comm/store.h"
#include "comm/transport.h"

namespace dtrain {

struct WorldInfo {
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;
  std::string launched_by = "single";  // "dtrain", "torchrun-env", "mpirun", "srun", "single"
  std::string store_url;               // empty: decided by open_world_store
  std::string token;
  TransportOptions transport;
};

WorldInfo world_from_env(const Settings& settings = Settings::process());

// The transport's options from the settings (DTRAIN_TRANSPORT, DTRAIN_TIMEOUT, ...; see
// base/settings.cc); ranks_on_host is the job's local size (0 = each group's size).
TransportOptions transport_options(const Settings& settings, int ranks_on_host = 0);

// An address as given, or the first IPv4 address of the interface named; InvalidArgument else.
std::string resolve_bind_address(const std::string& value);

// Opens (and for MASTER_ADDR jobs, on rank 0, serves) the store described by `info`.
// *keepalive holds a store server that must outlive the store's users.
std::shared_ptr<Store> open_world_store(const WorldInfo& info, std::shared_ptr<void>* keepalive);

}  // namespace dtrain
