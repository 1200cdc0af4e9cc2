#include "comm/engine.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string>

#include "base/env.h"
#include "base/error.h"
#include "comm/socket.h"

namespace dtrain {
namespace {

// Splits at commas outside brackets: "a[1-2,4],b" -> {"a[1-2,4]", "b"}.
std::vector<std::string> split_top(const std::string& s) {
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  for (char c : s) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      if (!cur.empty()) parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) parts.push_back(cur);
  return parts;
}

std::string local_hostname() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

}  // namespace

std::vector<std::string> expand_nodelist(const std::string& list) {
  std::vector<std::string> hosts;
  for (const std::string& part : split_top(list)) {
    const auto open = part.find('[');
    if (open == std::string::npos) {
      hosts.push_back(part);
      continue;
    }
    const auto close = part.find(']', open);
    DT_CHECK(close != std::string::npos, InvalidArgument, "host list '" << list << "': unclosed '[' in '" << part << "'");
    const std::string prefix = part.substr(0, open), suffix = part.substr(close + 1);
    for (const std::string& range : split_top(part.substr(open + 1, close - open - 1))) {
      const auto dash = range.find('-');
      const std::string lo = range.substr(0, dash), hi = dash == std::string::npos ? lo : range.substr(dash + 1);
      DT_CHECK(!lo.empty() && lo.find_first_not_of("0123456789") == std::string::npos && !hi.empty() &&
                   hi.find_first_not_of("0123456789") == std::string::npos,
               InvalidArgument, "host list '" << list << "': '" << range << "' is not a number or range");
      const long a = std::atol(lo.c_str()), b = std::atol(hi.c_str());
      DT_CHECK(a <= b && b - a < 100000, InvalidArgument, "host list '" << list << "': bad range '" << range << "'");
      for (long i = a; i <= b; ++i) {
        std::string n = std::to_string(i);
        if (n.size() < lo.size()) n.insert(0, lo.size() - n.size(), '0');  // keep the zero padding
        hosts.push_back(prefix + n + suffix);
      }
    }
  }
  return hosts;
}

bool in_slurm_batch_step() {
  if (!env_get("SLURM_JOB_ID") || !env_get("SLURM_PROCID")) return false;
  auto step = env_get("SLURM_STEP_ID");
  if (!step) step = env_get("SLURM_STEPID");
  return !step || *step == "4294967291" || *step == "batch";
}

int engine_hosts(int size, int local_size, std::string* why) {
  // mpirun inside an allocation, or dtrain run inside an srun step: their own counts rule.
  const bool other = env_get("OMPI_COMM_WORLD_RANK") || env_get("RANK");
  if (auto nodes = env_get("SLURM_STEP_NUM_NODES"); nodes && !other && env_get("SLURM_PROCID") && !in_slurm_batch_step()) {
    if (why) *why = "SLURM_STEP_NUM_NODES=" + *nodes;
    return std::max(1, std::atoi(nodes->c_str()));
  }
  if (size > local_size) {
    if (why) *why = "world size " + std::to_string(size) + " but " + std::to_string(local_size) + " rank(s) on this host";
    return 2;
  }
  return 1;
}

int slurm_tasks_on_node() {
  auto list = env_get("SLURM_STEP_TASKS_PER_NODE");
  if (!list) list = env_get("SLURM_TASKS_PER_NODE");
  const auto node = env_get("SLURM_NODEID");
  if (!list || !node || node->empty() || node->find_first_not_of("0123456789") != std::string::npos) return 0;
  long want = std::atol(node->c_str()), at = 0;
  std::stringstream in(*list);
  for (std::string item; std::getline(in, item, ',');) {
    // "N" or "N(xM)": N tasks on each of M nodes.
    char* end = nullptr;
    const long tasks = std::strtol(item.c_str(), &end, 10);
    long nodes = 1;
    if (end == item.c_str() || tasks < 1) return 0;
    if (*end == '(') {
      if (end[1] != 'x') return 0;
      char* close = nullptr;
      nodes = std::strtol(end + 2, &close, 10);
      if (nodes < 1 || *close != ')' || close[1] != '\0') return 0;
    } else if (*end != '\0') {
      return 0;
    }
    if (want < at + nodes) return static_cast<int>(tasks);
    at += nodes;
  }
  return 0;
}

std::vector<std::string> engine_peer_hosts() {
  std::vector<std::string> peers;
  const std::string me = env_string("SLURMD_NODENAME", local_hostname());  // SLURM's name for this node
  if (auto list = env_get("SLURM_STEP_NODELIST"); list && !list->empty()) {
    for (auto& h : expand_nodelist(*list))
      if (h != me) peers.push_back(h);
  }
  // OpenMPI: mpirun's own address, "jobid.vpid;tcp://10.0.0.1,10.1.0.1:port;..."
  if (auto uri = env_get("OMPI_MCA_orte_hnp_uri")) {
    const auto t = uri->find("tcp://");
    if (t != std::string::npos) {
      const std::string rest = uri->substr(t + 6);
      const auto end = rest.find_first_of(",:;");
      peers.push_back(rest.substr(0, end));
    }
  }
  return peers;
}

std::string route_source_address(const std::string& host) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  if (::getaddrinfo(host.c_str(), "9", &hints, &res) != 0 || !res) return "";
  std::string out;
  Fd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (s.valid() && ::connect(s.get(), res->ai_addr, res->ai_addrlen) == 0) {
    sockaddr_in local{};
    socklen_t len = sizeof local;
    char buf[INET_ADDRSTRLEN];
    if (::getsockname(s.get(), reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        ::inet_ntop(AF_INET, &local.sin_addr, buf, sizeof buf))
      out = buf;
  }
  ::freeaddrinfo(res);
  return out;
}

std::string first_host_address() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* a = list; a && found.empty(); a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || !(a->ifa_flags & IFF_UP) || (a->ifa_flags & IFF_LOOPBACK))
      continue;
    char buf[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf);
    found = buf;
  }
  ::freeifaddrs(list);
  return found;
}

std::string routed_bind_address(const std::vector<std::string>& peers) {
  for (const std::string& p : peers) {
    std::string a = route_source_address(p);
    if (!a.empty() && !is_loopback(a)) return a;
  }
  return first_host_address();
}

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr == "::1" || addr.rfind("127.", 0) == 0;
}

}  // namespace dtrain
