// comm/world.h — who am I in the job: rank, size and rendezvous, read from the environment.
//
// Contract: world_from_env() reads the launcher's variables from the environment and the DTRAIN_*
// ones from a settings snapshot (base/settings.h), in order of precedence,
//   rank/size: RANK + WORLD_SIZE (dtrain run, torchrun), OMPI_COMM_WORLD_RANK/SIZE (mpirun),
//              PMI_RANK/PMI_SIZE, SLURM_PROCID/SLURM_NTASKS (srun); else a single process.
//   local:     LOCAL_RANK/LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK/SIZE, MPICH's
//              MPI_LOCALRANKID/MPI_LOCALNRANKS, SLURM_LOCALID and (srun) the step's tasks on
//              this node (comm/engine.h slurm_tasks_on_node).
//              An sbatch script (SLURM's batch step, comm/engine.h) is not a rank: SLURM_*
//              counts only inside an srun step, so `dtrain train -n N` there launches.
//   hosts:     how many hosts the engine says the ranks span (comm/engine.h: engine_hosts).
//   store:     DTRAIN_STORE (tcp://HOST:PORT or file:///DIR, set by dtrain run); else
//              MASTER_ADDR + MASTER_PORT, where rank 0 serves the store; else, started by a
//              PMIx engine (srun --mpi=pmix, OpenMPI's mpirun) and built with PMIx, rank 0
//              serves a TcpStore on the address that routes to its peers with a fresh random
//              token and hands "host port token" to the others through PMIx; else, for an
//              srun step spanning hosts, rank 0 serves on the first host of
//              SLURM_STEP_NODELIST at a port derived from the job and step ids (DTRAIN_TOKEN
//              required); else, for a job on one host started by mpirun/srun, a private file
//              store /tmp/dtrain-UID-JOB-STEP (SLURM_JOB_ID or OMPI_MCA_ess_base_jobid,
//              SLURM_STEP_ID or 0), one generation per run, removed by the last rank
//              (open_job_file_store in file_store.h); a single process gets an in-memory
//              store. A job spanning hosts with none of these is an immediate InvalidArgument
//              naming what is missing.
//   token:     DTRAIN_TOKEN (the launcher generates it). A TCP store needs it; its absence
//              is an InvalidArgument saying how to set it.
//   transport: DTRAIN_TRANSPORT (auto|shm|tcp), DTRAIN_TIMEOUT (seconds, default 300, for every
//              blocking call), DTRAIN_CONNECT_TIMEOUT (rendezvous; default DTRAIN_TIMEOUT),
//              DTRAIN_BIND_ADDR (address or interface name the tcp transport listens on and
//              publishes; default 127.0.0.1 on one host, the address that routes to the peers
//              when the job spans hosts), DTRAIN_SHM_RING_BYTES, DTRAIN_SPIN_US,
//              DTRAIN_YIELD_US, DTRAIN_HOST_ID; LOCAL_WORLD_SIZE tells it whether ranks
//              outnumber the cores.
// Precedence: a program's own settings (dtrain train's flags: WorldInfo::set_timeout, the
// transport kind) > the environment > the defaults; run_training applies the flags given.
// A malformed value is an InvalidArgument naming the variable. On a job spanning hosts, a
// tcp address that is loopback is an InvalidArgument naming DTRAIN_BIND_ADDR.
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
  int hosts = 1;             // hosts the ranks span, as the engine says (comm/engine.h)
  std::string hosts_reason;  // what said so ("SLURM_STEP_NUM_NODES=2"), for error messages
  bool bind_given = false;   // DTRAIN_BIND_ADDR was set
  bool connect_timeout_given = false;  // DTRAIN_CONNECT_TIMEOUT was set
  TransportOptions transport;

  // Every blocking call's timeout (and the rendezvous's, unless DTRAIN_CONNECT_TIMEOUT is set).
  void set_timeout(double seconds);
};

WorldInfo world_from_env(const Settings& settings = Settings::process());

// The transport's options from the settings (DTRAIN_TRANSPORT, DTRAIN_TIMEOUT, ...; see
// base/settings.cc); ranks_on_host is the job's local size (0 = each group's size).
TransportOptions transport_options(const Settings& settings, int ranks_on_host = 0);

// An address as given, or the first IPv4 address of the interface named; InvalidArgument else.
std::string resolve_bind_address(const std::string& value);

// A fresh 128-bit job secret, as 32 hex digits (getrandom).
std::string fresh_token();

// Opens (and for MASTER_ADDR, PMIx and SLURM-nodelist jobs, on rank 0, serves) the store
// described by `info`; *keepalive holds a store server that must outlive the store's users.
// Fills in what the rendezvous decides: the token (PMIx), the tcp bind address (a job spanning
// hosts without DTRAIN_BIND_ADDR), and checks that no address advertised to another host is
// loopback.
std::shared_ptr<Store> open_world_store(WorldInfo& info, std::shared_ptr<void>* keepalive);

}  // namespace dtrain
