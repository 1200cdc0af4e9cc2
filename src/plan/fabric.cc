// plan/fabric.cc — a machine model as a job over tcp, on one host or several, sees it
// (plan/cluster.h over_fabric).
//
// The calibration times the links as the executors use them: shared memory inside a host
// (windows, slots, in-place reads, each with its own tables) and tcp (on one host through
// loopback; across hosts where `bench calibrate` ran across them). A job over tcp takes none
// of the shared-memory paths, so its prediction keeps the compute figures and swaps the
// links: the tcp link inside a node as well as between nodes. What the shared-memory
// calibration measured of the cores stays: the meeting penalty, and the tensor-parallel
// blocks' excess over the formula (worked out against the machine as calibrated, timed_on).
#include <algorithm>
#include <memory>
#include <string>

#include "plan/cluster.h"

namespace dtrain::plan {

Cluster over_fabric(Cluster c, const std::string& transport, int hosts, int ranks_per_host) {
  const bool tcp = transport == "tcp" || hosts > 1;
  if (!tcp) return c;
  const auto machine = std::make_shared<const Cluster>(c);
  c.timed_on = machine;
  // Every transfer through the network stack: the tcp link and its tables inside the node
  // too, and none of the shared-memory paths' figures (their tables and gap factors).
  c.shared_memory = false;
  c.intra = c.inter;
  // (The tcp tables carry the collectives by rank count timed over loopback, where the
  // calibration has them: `bench calibrate`'s add_tcp_collectives_by_ranks.)
  c.intra_sizes = c.inter_sizes;
  // What the shared-memory tables measured of the cores rather than of the link stays: the
  // meeting penalty (ranks beyond the cores finishing their compute one core at a time).
  c.intra_sizes.meeting_penalty_by_ranks = machine->intra_sizes.meeting_penalty_by_ranks;
  c.source += hosts > 1 ? ", over tcp" : ", over tcp (loopback)";
  if (hosts > 1) {
    c.nodes = hosts;
    c.ranks_per_node = std::max(1, ranks_per_host);
    if (c.hosts_calibrated) {
      c.inter = c.hosts_link, c.inter_sizes = c.hosts_sizes;
      c.source += ", " + std::to_string(hosts) + " hosts (the link between them calibrated)";
    } else {
      c.source += ", " + std::to_string(hosts) +
                  " hosts (the link between them priced as this host's loopback tcp: no calibration across hosts)";
    }
  }
  return c;
}

}  // namespace dtrain::plan
