// coll/hierarchical.h — topology-aware all-reduce for ranks spread over several hosts.
//
// Why. A flat all-reduce over tcp sends each rank's share across the hosts' links: a ring of
// N ranks moves 2(N-1)/N of the buffer over its edges, and where the ranks of a host share
// one link its edges between hosts carry that for every rank. Measured on two network-
// namespace hosts joined by 1 Gbit/s, 2 ranks each (scripts/validate_hosts.sh PER_HOST=2):
// the 4-rank ring all-reduce of 1 MiB took 26.2 ms, the 2-rank one (a rank a host) 11.2.
// Within a host the ranks share memory; between hosts only a 1/L slice of each rank's
// buffer needs to travel.
//
// Contract
// - Hierarchy(comm, host_id) is collective over comm: ranks that pass the same host_id form
//   one `local` sub-communicator (ordered by rank); the first rank of each host joins the
//   `leaders` sub-communicator (others get nullptr). When every host has the same number of
//   ranks L, the ranks with the same local rank also form a `peers` sub-communicator, one
//   rank a host. Build it once and reuse it: building splits the communicator, which
//   creates transports.
// - allreduce(buf, count, t, op): with peers, a reduce-scatter within the host (each local
//   rank ends with its 1/L block summed over the host, over shm when the host's ranks share
//   memory), an all-reduce of that block among the peers (auto over tcp between hosts: L
//   flows of 1/L each), an all-gather within the host; the count % L tail goes through
//   the local and then the peers' all-reduce whole. Without peers (hosts of unequal
//   sizes): reduce within the host to the local leader (binomial tree), all-reduce among
//   the leaders, broadcast within the host. kAvg divides by the whole group's size once
//   at the end. All ranks end bit-identical.
// - reduce_scatter / allgather (hosts of equal sizes, equal blocks): the same split of the
//   work. The reduce-scatter packs the blocks by the local rank that owns them, reduce-
//   scatters them within the host (local rank j ends with the host's sums of the H blocks
//   of the ranks of local rank j) and then among the peers; the all-gather runs it back.
//   Only (H-1)/H of a rank's H blocks cross the hosts' links, against a flat ring's edges
//   between hosts carrying (N-1)/N of the buffer for each rank of the host behind them.
//   Auto takes them where the all-reduce takes the hierarchy and the hosts are even.
// - host_hierarchy(comm, timeout_s) is the hierarchy auto all-reduces (and, hosts even,
//   reduce-scatters and all-gathers) take (coll/collectives.cc) on a communicator over tcp
//   of more than 2 ranks: built on the first call that asks, which
//   must be the same call on every rank (collective: an all-gather of the ranks'
//   hierarchy_host_id, hashed, within timeout_s, then the splits), and kept as the
//   communicator's attachment. Null, and nothing built, where the ranks are on one host, or on as many
//   hosts as ranks (a flat all-reduce is the hierarchy then), or the transport is shm.
// - allreduce_hierarchical_once(call, ...) is what Algorithm::kHierarchical runs inside
//   allreduce(): the communicator's hierarchy from hierarchy_host_id(comm.coll_config()),
//   built at the first such call and kept (one host, or a rank a host, included).
// - hierarchy_host_id(config): config.host_id (DTRAIN_HOST_ID), else the host name.
// Thread-safety: like Communicator — one collective at a time, same order on every rank.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "coll/call.h"
#include "coll/communicator.h"
#include "coll/types.h"

namespace dtrain {

class Hierarchy {
 public:
  Hierarchy(Communicator& comm, const std::string& host_id);
  // host_of[r]: the index of rank r's host (hosts numbered by their first rank).
  Hierarchy(Communicator& comm, const std::vector<int>& host_of);
  void allreduce(void* buf, size_t count, DType t, ReduceOp op, const AllreduceOptions& opts = {});
  // With peers only (hosts of equal sizes), `count` elements a rank, in the parent's rank
  // order as reduce_scatter and allgather have them; kAvg divides by the whole group.
  void reduce_scatter(const void* send, void* recv, size_t count, DType t, ReduceOp op, double timeout_s);
  void allgather(const void* send, void* recv, size_t count, DType t, double timeout_s);
  Communicator& local() { return *local_; }
  Communicator* leaders() { return leaders_.get(); }
  Communicator* peers() { return peers_.get(); }
  int hosts() const { return hosts_; }

 private:
  void split_by_host(const std::vector<int>& host_of);

  Communicator& comm_;
  std::shared_ptr<Communicator> local_, leaders_, peers_;
  int hosts_ = 0;
  std::vector<char> block_, packed_;  // scratch between calls
  // by_local_[j]: the parent's ranks of local rank j, one a host, in the peers' rank order.
  std::vector<std::vector<int>> by_local_;
};

// The hosts of comm's ranks: host_of[r] for every rank (collective: an all-gather of each
// rank's host_id, hashed, within timeout_s).
std::vector<int> host_indices(Communicator& comm, const std::string& host_id, double timeout_s);
Hierarchy* host_hierarchy(Communicator& comm, double timeout_s);

std::string hierarchy_host_id(const CollConfig& config);
void allreduce_hierarchical_once(Call& call, char* buf, size_t count);

}  // namespace dtrain
