#include "comm/world.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <unistd.h>

#include "base/env.h"
#include "base/error.h"
#include "base/settings.h"
#include "comm/engine.h"
#include "comm/file_store.h"
#include "comm/pmix_exchange.h"
#include "comm/socket.h"
#include "comm/tcp_store.h"

namespace dtrain {

// DTRAIN_BIND_ADDR may name an interface ("eth0"): use its first IPv4 address.
std::string resolve_bind_address(const std::string& value) {
  if (value.empty() || value.find_first_of(".:") != std::string::npos) return value;
  ifaddrs* list = nullptr;
  DT_SYSCHECK(::getifaddrs(&list), "getifaddrs");
  std::string found;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || value != a->ifa_name) continue;
    char buf[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf);
    found = buf;
    break;
  }
  ::freeifaddrs(list);
  if (found.empty() && value != "localhost")
    DT_THROW(InvalidArgument, "DTRAIN_BIND_ADDR='" << value << "' is neither an address nor an interface with an IPv4 "
                                                   << "address (see 'ip -4 addr')");
  return found.empty() ? value : found;
}

WorldInfo world_from_env(const Settings& settings) {
  WorldInfo w;
  auto pick = [&](const char* rank_var, const char* size_var, const char* by) {
    if (w.launched_by != "single" || !env_get(rank_var) || !env_get(size_var)) return;
    w.rank = static_cast<int>(env_int(rank_var, 0));
    w.size = static_cast<int>(env_int(size_var, 1));
    w.launched_by = by;
  };
  pick("RANK", "WORLD_SIZE", settings.has("DTRAIN_STORE") ? "dtrain" : "torchrun-env");
  pick("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "mpirun");
  pick("PMI_RANK", "PMI_SIZE", "mpirun");
  if (!in_slurm_batch_step()) pick("SLURM_PROCID", "SLURM_NTASKS", "srun");  // an sbatch script is no rank
  DT_CHECK(w.size >= 1 && w.rank >= 0 && w.rank < w.size, InvalidArgument,
           "rank " << w.rank << " and world size " << w.size << " from the environment do not fit together");
  w.local_rank = static_cast<int>(env_int(
      "LOCAL_RANK", env_int("OMPI_COMM_WORLD_LOCAL_RANK", env_int("MPI_LOCALRANKID", env_int("SLURM_LOCALID", w.rank)))));
  const int slurm_here = w.launched_by == "srun" ? slurm_tasks_on_node() : 0;
  // MPICH's hydra (PMI_RANK/PMI_SIZE) says MPI_LOCALNRANKS.
  w.local_size = static_cast<int>(env_int(
      "LOCAL_WORLD_SIZE",
      env_int("OMPI_COMM_WORLD_LOCAL_SIZE", env_int("MPI_LOCALNRANKS", slurm_here > 0 ? slurm_here : w.size))));
  w.token = settings.has("DTRAIN_TOKEN") ? settings.text("DTRAIN_TOKEN") : "";
  w.store_url = settings.has("DTRAIN_STORE") ? settings.text("DTRAIN_STORE") : "";
  w.hosts = engine_hosts(w.size, w.local_size, &w.hosts_reason);
  w.transport = transport_options(settings, w.local_size);
  w.transport.fabric.token = w.token;
  w.bind_given = settings.has("DTRAIN_BIND_ADDR");
  w.connect_timeout_given = settings.has("DTRAIN_CONNECT_TIMEOUT");
  return w;
}

TransportOptions transport_options(const Settings& settings, int ranks_on_host) {
  TransportOptions t;
  t.kind = parse_transport_kind(settings.choice("DTRAIN_TRANSPORT"));
  t.timeout_s = settings.number("DTRAIN_TIMEOUT");
  t.fabric.connect_timeout_s = settings.has("DTRAIN_CONNECT_TIMEOUT") ? settings.number("DTRAIN_CONNECT_TIMEOUT") : t.timeout_s;
  t.fabric.bind_host = resolve_bind_address(settings.text("DTRAIN_BIND_ADDR"));
  t.fabric.shm_ring_bytes = static_cast<size_t>(settings.bytes("DTRAIN_SHM_RING_BYTES"));
  t.fabric.tcp_congestion = settings.text("DTRAIN_TCP_CONGESTION");
  if (settings.has("DTRAIN_SPIN_US")) t.spin_us = settings.number("DTRAIN_SPIN_US");
  t.yield_us = settings.number("DTRAIN_YIELD_US");
  if (settings.has("DTRAIN_HOST_ID")) t.host_id = settings.text("DTRAIN_HOST_ID");
  t.ranks_on_host = ranks_on_host;
  return t;
}

void WorldInfo::set_timeout(double seconds) {
  transport.timeout_s = seconds;
  if (!connect_timeout_given) transport.fabric.connect_timeout_s = seconds;
}

std::string fresh_token() {
  unsigned char b[16];
  size_t got = 0;
  while (got < sizeof b) {
    ssize_t k = ::getrandom(b + got, sizeof b - got, 0);
    DT_SYSCHECK(k, "getrandom for the job token");
    got += static_cast<size_t>(k);
  }
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned char c : b) s += {hex[c >> 4], hex[c & 15]};
  return s;
}

namespace {

std::string this_host() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

// On a job spanning hosts, the tcp transport must listen where the peers can reach it: the
// address that routes to the store's host (or to the engine's other hosts) unless
// DTRAIN_BIND_ADDR chose one; advertising loopback to another host is an error at once.
void choose_bind(WorldInfo& w, const std::string& store_host) {
  if (w.hosts <= 1) return;
  std::string& bind = w.transport.fabric.bind_host;
  const bool store_local = !store_host.empty() && is_loopback(store_host);
  if (!w.bind_given) {
    std::vector<std::string> peers;
    if (!store_host.empty()) peers.push_back(store_host);
    for (auto& p : engine_peer_hosts()) peers.push_back(p);
    std::string a = routed_bind_address(peers);
    if (!a.empty() && !store_local) bind = a;
  }
  // Ranks that meet at a loopback store really are on one host (e.g. --nnodes 2 on one machine).
  DT_CHECK(!is_loopback(bind) || store_local, InvalidArgument,
           "rank " << w.rank << " on " << this_host() << ": the job spans " << w.hosts << " hosts (" << w.hosts_reason
                   << ") but this rank's tcp address is " << bind << " (loopback), which the other hosts cannot reach: "
                   << "set DTRAIN_BIND_ADDR to this host's address or interface on the network the hosts share "
                   << "(e.g. DTRAIN_BIND_ADDR=eth0)");
}

std::string host_of_url(const std::string& url) {
  if (url.rfind("tcp://", 0) != 0) return "";
  return split_host_port(url.substr(6), "DTRAIN_STORE").first;
}

// rank 0 serves a TcpStore on a fresh token and hands "host:port:token" to every rank via PMIx.
std::shared_ptr<Store> pmix_store(WorldInfo& w, std::shared_ptr<void>* keepalive, double t) {
  std::string value;
  if (w.rank == 0) {
    choose_bind(w, "");
    const std::string host = w.hosts > 1 ? w.transport.fabric.bind_host : "127.0.0.1";
    const std::string token = fresh_token();
    auto server = std::make_shared<TcpStoreServer>(host, 0, token);
    *keepalive = server;
    value = host + " " + std::to_string(server->port()) + " " + token;
  }
  value = pmix_share_from_rank0(w.rank, value, t);
  const auto a = value.find(' '), b = value.rfind(' ');
  DT_CHECK(a != std::string::npos && b > a, IoError, "rank " << w.rank << ": malformed rendezvous from PMIx: '" << value << "'");
  const std::string host = value.substr(0, a);
  const int port = std::atoi(value.substr(a + 1, b - a - 1).c_str());
  w.token = value.substr(b + 1);
  w.transport.fabric.token = w.token;
  if (w.rank != 0) choose_bind(w, host);
  return std::make_shared<TcpStore>(host, port, w.token, t);
}

// An srun step spanning hosts without PMIx: rank 0 serves on the step's first host, at a port
// derived from the job and step ids, admitting ranks that present DTRAIN_TOKEN.
std::shared_ptr<Store> nodelist_store(WorldInfo& w, std::shared_ptr<void>* keepalive, double t) {
  const std::vector<std::string> hosts = expand_nodelist(env_string("SLURM_STEP_NODELIST", ""));
  DT_CHECK(!hosts.empty(), InvalidArgument, "rank " << w.rank << ": SLURM_STEP_NODELIST is empty");
  const std::string job = env_string("SLURM_JOB_ID", "0"), step = env_string("SLURM_STEP_ID", env_string("SLURM_STEPID", "0"));
  const int port = static_cast<int>(env_int("MASTER_PORT", 20000 + static_cast<int64_t>((std::stoull(job) * 31 + std::stoull(step)) % 20000)));
  if (w.rank == 0) {
    DT_CHECK(env_int("SLURM_NODEID", 0) == 0, InvalidArgument,
             "rank 0 runs on node " << env_int("SLURM_NODEID", 0) << " of the step, not on its first host " << hosts[0]
                                    << ", where the rendezvous is expected: use the default (block) distribution, or set MASTER_ADDR");
    *keepalive = std::make_shared<TcpStoreServer>("0.0.0.0", port, w.token);
  }
  choose_bind(w, hosts[0]);
  return std::make_shared<TcpStore>(hosts[0], port, w.token, t);
}

}  // namespace

std::shared_ptr<Store> open_world_store(WorldInfo& w, std::shared_ptr<void>* keepalive) {
  double t = w.transport.fabric.connect_timeout_s;
  if (!w.store_url.empty()) {
    DT_CHECK(w.store_url.rfind("tcp://", 0) != 0 || !w.token.empty(), InvalidArgument,
             "DTRAIN_STORE is a tcp store but DTRAIN_TOKEN is empty: every rank must present the job's secret token");
    choose_bind(w, host_of_url(w.store_url));
    std::shared_ptr<Store> store = open_store(w.store_url, w.token, t);
    // A restarted job (dtrain run --max-restarts) meets in a fresh key space of the same store.
    const int64_t attempt = env_int("DTRAIN_RESTART", 0);
    if (attempt > 0) return std::make_shared<PrefixStore>("attempt-" + std::to_string(attempt), store);
    return store;
  }
  if (w.size == 1) return std::make_shared<MemoryStore>(t);
  if (auto addr = env_get("MASTER_ADDR")) {
    auto port = env_get("MASTER_PORT");
    DT_CHECK(port.has_value(), InvalidArgument, "MASTER_ADDR is set but MASTER_PORT is not");
    DT_CHECK(!w.token.empty(), InvalidArgument,
             "MASTER_ADDR/MASTER_PORT rendezvous needs DTRAIN_TOKEN: export the same secret on every rank "
             "(e.g. DTRAIN_TOKEN=$(openssl rand -hex 16); with mpirun add -x DTRAIN_TOKEN)");
    auto [host, p] = split_host_port(*addr + ":" + *port, "MASTER_ADDR:MASTER_PORT");
    choose_bind(w, host);
    if (w.rank == 0) {
      auto server = std::make_shared<TcpStoreServer>(host, p, w.token);
      *keepalive = server;
    }
    return std::make_shared<TcpStore>(host, p, w.token, t);
  }
  // Started by a PMIx engine (srun --mpi=pmix, OpenMPI's mpirun): rendezvous through it.
  if (pmix_built() && pmix_in_env()) return pmix_store(w, keepalive, t);
  const bool srun = w.launched_by == "srun" && env_get("SLURM_STEP_NODELIST").has_value();
  if (w.hosts > 1) {
    const std::string with_pmix = pmix_built() ? (w.launched_by == "srun" ? "start the step with 'srun --mpi=pmix' "
                                                                           : "start it with OpenMPI's mpirun (PMIx) ")
                                               : "rebuild dtrain with PMIx (apt-get install libpmix-dev) and use 'srun --mpi=pmix' / mpirun, ";
    DT_CHECK(srun && !w.token.empty(), InvalidArgument,
             "rank " << w.rank << " on " << this_host() << ": this job spans " << w.hosts << " hosts (" << w.hosts_reason
                     << ") but has no rendezvous the hosts share: " << with_pmix
                     << (srun ? "or export DTRAIN_TOKEN=$(openssl rand -hex 16) before srun (rank 0 then serves the store on "
                                "the step's first host), "
                              : "")
                     << "or set MASTER_ADDR, MASTER_PORT and DTRAIN_TOKEN on every rank");
    return nodelist_store(w, keepalive, t);
  }
  // mpirun/srun on one host without an address: a private directory keyed by the job and the
  // step (srun steps of one allocation share the job id; an mpirun is one step), holding one
  // generation per run (file_store.h).
  std::string job = env_string("SLURM_JOB_ID", env_string("OMPI_MCA_ess_base_jobid", ""));
  std::string step = env_string("SLURM_STEP_ID", "0");
  DT_CHECK(!job.empty(), InvalidArgument,
           "no rendezvous: world size " << w.size << " but neither DTRAIN_STORE nor MASTER_ADDR/MASTER_PORT is set "
                                        << "(start the ranks with 'dtrain run -n N', or set MASTER_ADDR, MASTER_PORT "
                                           "and DTRAIN_TOKEN)");
  for (const std::string* id : {&job, &step})
    DT_CHECK(id->find('/') == std::string::npos && *id != ".." && *id != ".", InvalidArgument,
             "job or step id '" << *id << "' from the environment is not a plain name");
  return open_job_file_store("/tmp/dtrain-" + std::to_string(::getuid()) + "-" + job + "-" + step, w.rank, w.size, t);
}

}  // namespace dtrain
