#include "comm/world.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include "base/env.h"
#include "base/error.h"
#include "base/settings.h"
#include "comm/file_store.h"
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
  pick("SLURM_PROCID", "SLURM_NTASKS", "srun");
  DT_CHECK(w.size >= 1 && w.rank >= 0 && w.rank < w.size, InvalidArgument,
           "rank " << w.rank << " and world size " << w.size << " from the environment do not fit together");
  w.local_rank = static_cast<int>(env_int("LOCAL_RANK", env_int("OMPI_COMM_WORLD_LOCAL_RANK", env_int("SLURM_LOCALID", w.rank))));
  w.local_size = static_cast<int>(env_int("LOCAL_WORLD_SIZE", env_int("OMPI_COMM_WORLD_LOCAL_SIZE", w.size)));
  w.token = settings.has("DTRAIN_TOKEN") ? settings.text("DTRAIN_TOKEN") : "";
  w.store_url = settings.has("DTRAIN_STORE") ? settings.text("DTRAIN_STORE") : "";
  w.transport = transport_options(settings, w.local_size);
  w.transport.fabric.token = w.token;
  return w;
}

TransportOptions transport_options(const Settings& settings, int ranks_on_host) {
  TransportOptions t;
  t.kind = parse_transport_kind(settings.choice("DTRAIN_TRANSPORT"));
  t.timeout_s = settings.number("DTRAIN_TIMEOUT");
  t.fabric.connect_timeout_s = settings.has("DTRAIN_CONNECT_TIMEOUT") ? settings.number("DTRAIN_CONNECT_TIMEOUT") : t.timeout_s;
  t.fabric.bind_host = resolve_bind_address(settings.text("DTRAIN_BIND_ADDR"));
  t.fabric.shm_ring_bytes = static_cast<size_t>(settings.bytes("DTRAIN_SHM_RING_BYTES"));
  if (settings.has("DTRAIN_SPIN_US")) t.spin_us = settings.number("DTRAIN_SPIN_US");
  t.yield_us = settings.number("DTRAIN_YIELD_US");
  if (settings.has("DTRAIN_HOST_ID")) t.host_id = settings.text("DTRAIN_HOST_ID");
  t.ranks_on_host = ranks_on_host;
  return t;
}

std::shared_ptr<Store> open_world_store(const WorldInfo& w, std::shared_ptr<void>* keepalive) {
  double t = w.transport.fabric.connect_timeout_s;
  if (!w.store_url.empty()) {
    DT_CHECK(w.store_url.rfind("tcp://", 0) != 0 || !w.token.empty(), InvalidArgument,
             "DTRAIN_STORE is a tcp store but DTRAIN_TOKEN is empty: every rank must present the job's secret token");
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
    if (w.rank == 0) {
      auto server = std::make_shared<TcpStoreServer>(host, p, w.token);
      *keepalive = server;
    }
    return std::make_shared<TcpStore>(host, p, w.token, t);
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
