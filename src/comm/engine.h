// comm/engine.h — what the job's engine (SLURM, OpenMPI, dtrain's launcher) says about where
// the ranks run, and the addresses that reach the other hosts.
//
// Contract
// - expand_nodelist("n[01-03,7],gpu1") = {"n01", "n02", "n03", "n7", "gpu1"}: SLURM's compact
//   host list (SLURM_JOB_NODELIST, SLURM_STEP_NODELIST), leading zeros kept. A malformed
//   list is an InvalidArgument naming it.
// - in_slurm_batch_step(): this process is an sbatch script (SLURM's batch step), not a task of
//   an srun step. sbatch exports SLURM_PROCID=0 to the script, so SLURM_PROCID alone does not
//   make a rank: a task of a step also has SLURM_STEP_ID (SLURM_STEPID), the batch script has
//   none (or the batch step's id, 4294967291 = SLURM_BATCH_SCRIPT).
// - engine_hosts(): how many hosts the job's ranks span as the engine tells it (srun:
//   SLURM_STEP_NUM_NODES unless OpenMPI or dtrain run started the rank; mpirun / dtrain run /
//   torchrun: 2 when the job has more ranks than this host, 1 otherwise); `why` gets the
//   variables that said so, for error messages.
// - slurm_tasks_on_node(): the tasks of this srun step on this node, from
//   SLURM_STEP_TASKS_PER_NODE (else SLURM_TASKS_PER_NODE: "2(x3),1" = 2, 2, 2, 1 by node) at
//   SLURM_NODEID (this node's index in the step); 0 when they are absent or do not parse
//   (srun sets no LOCAL_WORLD_SIZE; without this the whole step was counted on each host,
//   and a 2-node job of 16 ranks on 8-core hosts took each host for oversubscribed).
// - engine_peer_hosts(): the other hosts of this srun step (SLURM_STEP_NODELIST, expanded,
//   without this host's name), else the host of mpirun's daemon (OMPI_MCA_orte_hnp_uri);
//   may be empty.
// - route_source_address(host): the local IPv4 address the kernel would use to reach `host`
//   (a UDP socket connected to it; nothing is sent); "" when `host` does not resolve or has
//   no route. first_host_address(): the first non-loopback IPv4 address of an interface that
//   is up; "" if none.
// - routed_bind_address(peers): the address this rank's tcp transport should bind on a job
//   spanning hosts: the source address of the route to the first peer that has one, else
//   first_host_address(); "" when only loopback is left.
// - is_loopback(addr): 127.0.0.0/8, ::1 or "localhost".
// Thread-safety: pure functions of the environment and the routing table.
#pragma once

#include <string>
#include <vector>

namespace dtrain {

std::vector<std::string> expand_nodelist(const std::string& list);
bool in_slurm_batch_step();
int engine_hosts(int size, int local_size, std::string* why);
int slurm_tasks_on_node();
std::vector<std::string> engine_peer_hosts();
std::string route_source_address(const std::string& host);
std::string first_host_address();
std::string routed_bind_address(const std::vector<std::string>& peers);
bool is_loopback(const std::string& addr);

}  // namespace dtrain
