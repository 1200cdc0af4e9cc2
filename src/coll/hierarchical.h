// coll/hierarchical.h — topology-aware all-reduce for ranks spread over several hosts.
//
// Contract
// - Hierarchy(comm, host_id) is collective over comm: ranks that pass the same host_id form
//   one `local` sub-communicator (ordered by rank); the first rank of each host joins the
//   `leaders` sub-communicator (others get nullptr). Build it once and reuse it: building
//   splits the communicator, which creates transports.
// - allreduce(buf, count, t, op): reduce within the host to the local leader (binomial tree,
//   over shm when the host's ranks share memory), all-reduce among the leaders (auto: ring,
//   halving-doubling, ... over tcp between hosts), broadcast within the host. kAvg divides
//   by the whole group's size once at the end. All ranks end bit-identical.
// - allreduce_hierarchical_once(call, ...) is what Algorithm::kHierarchical runs inside
//   allreduce(): it builds a Hierarchy from hierarchy_host_id(comm.coll_config()) for that
//   one call (slow; meant for tests and one-off use).
// - hierarchy_host_id(config): config.host_id (DTRAIN_HOST_ID), else the host name.
// Thread-safety: like Communicator — one collective at a time, same order on every rank.
#pragma once

#include <memory>
#include <string>

#include "coll/call.h"
#include "coll/communicator.h"
#include "coll/types.h"

namespace dtrain {

class Hierarchy {
 public:
  Hierarchy(Communicator& comm, const std::string& host_id);
  void allreduce(void* buf, size_t count, DType t, ReduceOp op, const AllreduceOptions& opts = {});
  Communicator& local() { return *local_; }
  Communicator* leaders() { return leaders_.get(); }
  int hosts() const { return hosts_; }

 private:
  Communicator& comm_;
  std::shared_ptr<Communicator> local_, leaders_;
  int hosts_ = 0;
};

std::string hierarchy_host_id(const CollConfig& config);
void allreduce_hierarchical_once(Call& call, char* buf, size_t count);

}  // namespace dtrain
