// launch/launch.h — starting ranks: the engine behind `dtrain run` and every `-n N` subcommand.
//
// Contract
// - launch(opts, argv) starts opts.nproc local copies of argv with the environment torchrun
//   users know (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) plus
//   DTRAIN_STORE (the rendezvous the launcher serves, or node 0's for --nnodes > 1),
//   DTRAIN_TOKEN (a fresh 128-bit secret, or the one given for multi-node jobs),
//   DTRAIN_TRANSPORT and DTRAIN_TIMEOUT. It returns 0 when every rank exits 0.
// - When a rank exits non-zero or is killed, the others get SIGTERM (SIGKILL after a grace
//   period), and launch returns non-zero after printing which rank failed, how (exit code or
//   signal), and the tail of its stderr. SIGINT/SIGTERM to the launcher reach every rank.
// - The rank blamed is the one that failed first. Ranks that fail because a peer died report
//   it on their heartbeat pipe (comm/heartbeat.h); when the culprit and such witnesses have
//   all exited before the launcher looks, a witness is never blamed ahead of the culprit.
// - Ranks die with their launcher, even one killed with SIGKILL (PR_SET_PDEATHSIG); a launcher
//   that cannot start every rank (fork or descriptors exhausted) kills the ones it started.
//   -n is bounded (the CLI allows 1024 per node) and the descriptor limit is checked first.
// - Output lines are prefixed with "[rank R] " when opts.tag_output (stderr always passes
//   through line by line).
// - Hung ranks: every rank gets the write end of a pipe (DTRAIN_HEARTBEAT_FD) on which its
//   Communicator beats (comm/heartbeat.h). A rank that stops beating, or that the kernel
//   reports stopped (SIGSTOP), for opts.heartbeat_s seconds is reported as hung, by name, and
//   the job is stopped as for a failed rank — in seconds, not at the collective timeout.
// - Restarts: with opts.max_restarts = K > 0, a failed or hung job is started again, every
//   rank, up to K times; the ranks see DTRAIN_RESTART = the attempt (0 first), meet in a fresh
//   key space of the same store ("attempt-K/", comm/world.h) and resume from their checkpoints
//   (`dtrain train --checkpoint DIR` does). Multi-node: each node's launcher restarts its own
//   ranks when they fail (a lost peer makes every node's ranks fail), and node 0's store
//   serves every attempt. Each restart is announced on stderr with the failure that caused
//   it. An interrupt (SIGINT/SIGTERM to the launcher) is never restarted.
// - relaunch_self(opts, args) runs this same executable with `args` under launch(): how a
//   subcommand given -n N spawns its own ranks. inside_launched_rank() says whether this
//   process is already one rank of a job (so subcommands don't spawn again); an sbatch
//   script (SLURM's batch step, comm/engine.h) is not: there `dtrain train -n N` launches,
//   on this host, or, when the allocation spans several hosts (SLURM_JOB_NUM_NODES > 1), by
//   replacing itself with `srun --ntasks=N --kill-on-bad-exit=1 [--mpi=pmix]` (restarts and
//   heartbeats are then SLURM's business: --max-restarts does not apply).
#pragma once

#include <string>
#include <vector>

namespace dtrain::launch {

struct LaunchOptions {
  int nproc = 1;                 // ranks on this node
  int nnodes = 1;
  int node_rank = 0;
  std::string master;            // HOST:PORT of node 0's store (multi-node); "" = local, any port
  std::string transport = "auto";
  double timeout_s = 300;        // per blocking call inside the ranks
  std::string token;             // "" = generate (single node) / DTRAIN_TOKEN (multi-node)
  std::string bind_addr;         // tcp transport address or interface for this node's ranks
  bool tag_output = true;
  double grace_s = 5;            // SIGTERM -> SIGKILL
  int max_restarts = 0;          // start every rank again after a failure, up to this many times
  double heartbeat_s = 10;       // a rank silent (or stopped) this long is hung; 0: no check
};

int launch(const LaunchOptions& opts, const std::vector<std::string>& argv);
int relaunch_self(const LaunchOptions& opts, const std::vector<std::string>& args);
// The -n N path of a subcommand: runs `dtrain WORDS... ARGS...` (e.g. words {"bench", "p2p"}
// and the subcommand's own arguments) as opts.nproc ranks.
int relaunch_command(const LaunchOptions& opts, const std::vector<std::string>& words,
                     const std::vector<std::string>& args);
bool inside_launched_rank();

}  // namespace dtrain::launch
