// Hierarchical all-reduce: intra-host reduce, inter-host all-reduce among leaders,
// intra-host broadcast. Moves each byte across the slow inter-host links once per host
// instead of once per rank.
#include "coll/hierarchical.h"

#include <unistd.h>

#include <map>

#include "base/error.h"
#include "coll/collectives.h"
#include "coll/reduce_kernels.h"

namespace dtrain {

std::string hierarchy_host_id(const CollConfig& config) {
  if (!config.host_id.empty()) return config.host_id;
  char name[256] = {0};
  ::gethostname(name, sizeof name - 1);
  return name;
}

Hierarchy::Hierarchy(Communicator& comm, const std::string& host_id) : comm_(comm) {
  // Agree on host indices through the store: color = index of the host's first rank.
  Store& store = comm.store();
  uint64_t round = comm.next_sequence();
  std::string base = "hier/" + std::to_string(round) + "/";
  store.set(base + std::to_string(comm.rank()), host_id);
  std::vector<std::string> keys;
  for (int r = 0; r < comm.size(); ++r) keys.push_back(base + std::to_string(r));
  store.wait(keys, comm.timeout());
  std::map<std::string, int> first_rank;
  int color = -1, local_rank_is_first = 0;
  for (int r = 0; r < comm.size(); ++r) {
    std::string h = store.get(keys[r]);
    if (!first_rank.count(h)) first_rank[h] = r;
    if (r == comm.rank()) {
      color = first_rank[h];
      local_rank_is_first = first_rank[h] == r;
    }
  }
  hosts_ = static_cast<int>(first_rank.size());
  local_ = comm.split(color, comm.rank());
  leaders_ = comm.split(local_rank_is_first ? 0 : -1, comm.rank());
}

void Hierarchy::allreduce(void* buf, size_t count, DType t, ReduceOp op, const AllreduceOptions& opts) {
  ReduceOp partial = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  ReduceOptions ro;
  ro.timeout_s = opts.timeout_s;
  ro.segment_bytes = opts.segment_bytes;
  ro.deterministic = opts.deterministic;
  ::dtrain::reduce(*local_, buf, buf, count, t, partial, 0, ro);
  if (leaders_) {
    AllreduceOptions lo = opts;
    lo.algorithm = Algorithm::kAuto;
    ::dtrain::allreduce(*leaders_, buf, count, t, partial, lo);
  }
  BroadcastOptions bo;
  bo.timeout_s = opts.timeout_s;
  bo.segment_bytes = opts.segment_bytes;
  ::dtrain::broadcast(*local_, buf, count, t, 0, bo);
  if (op == ReduceOp::kAvg) finish_avg(t, buf, count, comm_.size());
}

void allreduce_hierarchical_once(Call& call, char* buf, size_t count) {
  Hierarchy h(call.comm(), hierarchy_host_id(call.comm().coll_config()));
  AllreduceOptions opts;
  opts.timeout_s = call.remaining() < 0 ? -1 : call.remaining();
  opts.segment_bytes = call.segment_elems() * call.elem();
  // kAvg's division is done by the caller (allreduce) over the whole group.
  ReduceOp op = call.redop() == ReduceOp::kAvg ? ReduceOp::kSum : call.redop();
  h.allreduce(buf, count, call.dtype(), op, opts);
}

}  // namespace dtrain
