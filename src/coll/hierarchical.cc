// Hierarchical all-reduce: within each host a reduce-scatter, across the hosts an all-reduce
// of each rank's block among its peers (the ranks of the same local rank, one a host), within
// each host an all-gather; or, hosts of unequal sizes, intra-host reduce, an all-reduce among
// the leaders, intra-host broadcast. Each byte crosses the hosts' links once per host
// instead of once per rank (coll/hierarchical.h says why and when auto takes it).
#include "coll/hierarchical.h"

#include <unistd.h>

#include <algorithm>
#include <map>

#include "base/error.h"
#include "coll/bytes.h"
#include "coll/collectives.h"
#include "coll/reduce_kernels.h"

namespace dtrain {

std::string hierarchy_host_id(const CollConfig& config) {
  if (!config.host_id.empty()) return config.host_id;
  char name[256] = {0};
  ::gethostname(name, sizeof name - 1);
  return name;
}

std::vector<int> host_indices(Communicator& comm, const std::string& host_id, double timeout_s) {
  // An all-gather of each rank's host id, hashed (FNV-1a: the same on every host and build),
  // bounded like any collective: a rank that never comes is an error naming it. A host is
  // numbered by its first rank's order.
  uint64_t fnv = 1469598103934665603ull;
  for (unsigned char ch : host_id) fnv = (fnv ^ ch) * 1099511628211ull;
  int64_t mine = static_cast<int64_t>(fnv >> 1);
  std::vector<int64_t> all(static_cast<size_t>(comm.size()));
  AllgatherOptions o;
  o.timeout_s = timeout_s;
  o.algorithm = Algorithm::kRing;
  const char* why = "finding the ranks' hosts (an all-gather of their host ids, at a communicator's first collective "
                    "that may take the hosts' hierarchy): ";
  try {
    allgather(comm, &mine, all.data(), 1, DType::kInt64, o);
  } catch (const PeerFailure& e) {
    throw PeerFailure(why + std::string(e.what()), e.peer());
  } catch (const Timeout& e) {
    throw Timeout(why + std::string(e.what()));
  } catch (const Desync& e) {
    throw Desync(why + std::string(e.what()));
  }
  std::map<int64_t, int> index;
  std::vector<int> host_of;
  for (int64_t x : all) host_of.push_back(index.emplace(x, static_cast<int>(index.size())).first->second);
  return host_of;
}

namespace {

// What is left of one call's limit for each of the sub-groups' steps it runs in turn (-1:
// none): the steps share the limit, they do not each get it whole.
struct StepLimit {
  Deadline by;
  explicit StepLimit(double timeout_s) : by(Deadline::after(timeout_s)) {}
  double left() const { return by.infinite() ? -1 : std::max(0.0, by.remaining_seconds()); }
};

// One sub-group's step. A dead rank goes on as an error already named (coll/call.h) carrying
// its world rank: the shared-memory paths throw theirs without Call's naming, and the outer
// call must not read a sub-group's rank as one of its own.
template <class F>
void step(Communicator& sub, F&& f) {
  try {
    f();
  } catch (const NamedPeerFailure&) {
    throw;
  } catch (const PeerFailure& e) {
    const int world = e.peer() >= 0 && e.peer() < sub.size() ? sub.world_rank(e.peer()) : e.peer();
    std::string what = e.what();
    if (world != e.peer())
      what += " (the group's rank " + std::to_string(e.peer()) + " is world rank " + std::to_string(world) + ")";
    throw NamedPeerFailure(what, e.peer(), world);
  }
  // A bare Timeout (a shared-memory path's) goes on as it is: the outer call then finds, in
  // its own numbers, which ranks never came, and on which host (a rank whose host-mate is
  // stuck across a cut link learns so only from the outer call's view).
}

}  // namespace

Hierarchy::Hierarchy(Communicator& comm, const std::string& host_id) : comm_(comm) {
  split_by_host(host_indices(comm, host_id, comm.timeout()));
}

Hierarchy::Hierarchy(Communicator& comm, const std::vector<int>& host_of) : comm_(comm) { split_by_host(host_of); }

void Hierarchy::split_by_host(const std::vector<int>& host_of) {
  DT_CHECK_EQ(host_of.size(), static_cast<size_t>(comm_.size()), InvalidArgument, "Hierarchy: one host per rank");
  hosts_ = *std::max_element(host_of.begin(), host_of.end()) + 1;
  const int me = comm_.rank(), host = host_of[static_cast<size_t>(me)];
  std::vector<int> ranks_on(static_cast<size_t>(hosts_));
  int local_rank = 0;
  for (int r = 0; r < comm_.size(); ++r) {
    if (r == me) local_rank = ranks_on[static_cast<size_t>(host)];
    ++ranks_on[static_cast<size_t>(host_of[static_cast<size_t>(r)])];
  }
  // Within a host the ranks share memory: its group takes shm (auto), even where the job
  // was told tcp (as `dtrain train` is across hosts).
  local_ = comm_.split_auto(host, me);
  leaders_ = comm_.split(local_rank == 0 ? 0 : -1, me);
  const bool even = std::all_of(ranks_on.begin(), ranks_on.end(), [&](int n) { return n == ranks_on[0]; });
  // Every rank knows `even` (the same host_of), so all of them split or none does.
  if (even && ranks_on[0] > 1 && hosts_ > 1) {
    peers_ = comm_.split(local_rank, me);
    by_local_.assign(static_cast<size_t>(ranks_on[0]), {});
    std::vector<int> seen(static_cast<size_t>(hosts_));
    for (int r = 0; r < comm_.size(); ++r)  // rank order: each list ascending, as the split's key orders the peers
      by_local_[static_cast<size_t>(seen[static_cast<size_t>(host_of[static_cast<size_t>(r)])]++)].push_back(r);
  }
}

void Hierarchy::allreduce(void* buf, size_t count, DType t, ReduceOp op, const AllreduceOptions& opts) {
  ReduceOp partial = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  const StepLimit limit(resolve_timeout(opts.timeout_s, comm_.timeout()));
  AllreduceOptions ao;
  ao.segment_bytes = opts.segment_bytes;
  ao.deterministic = opts.deterministic;
  if (peers_) {
    // Reduce-scatter within the host, each block all-reduced among its peers, all-gathered.
    const size_t L = static_cast<size_t>(local_->size()), es = dtype_size(t), q = count / L, tail = count - q * L;
    char* data = static_cast<char*>(buf);
    if (q > 0) {
      block_.resize(q * es);
      ReduceScatterOptions rs;
      rs.timeout_s = limit.left();
      rs.segment_bytes = opts.segment_bytes;
      rs.deterministic = opts.deterministic;
      rs.scratch_send = true;  // the all-gather below writes every block of data again
      step(*local_, [&] { ::dtrain::reduce_scatter(*local_, data, block_.data(), q, t, partial, rs); });
      ao.timeout_s = limit.left();
      step(*peers_, [&] { ::dtrain::allreduce(*peers_, block_.data(), block_.data(), q, t, partial, ao); });
      AllgatherOptions ag;
      ag.timeout_s = limit.left();
      ag.segment_bytes = opts.segment_bytes;
      step(*local_, [&] { ::dtrain::allgather(*local_, block_.data(), data, q, t, ag); });
    }
    if (tail > 0) {  // fewer elements than the host has ranks: whole, in the host, then across
      char* rest = data + q * L * es;
      ao.timeout_s = limit.left();
      step(*local_, [&] { ::dtrain::allreduce(*local_, rest, rest, tail, t, partial, ao); });
      ao.timeout_s = limit.left();
      step(*peers_, [&] { ::dtrain::allreduce(*peers_, rest, rest, tail, t, partial, ao); });
    }
  } else {
    ReduceOptions ro;
    ro.timeout_s = limit.left();
    ro.segment_bytes = opts.segment_bytes;
    ro.deterministic = opts.deterministic;
    step(*local_, [&] { ::dtrain::reduce(*local_, buf, buf, count, t, partial, 0, ro); });
    if (leaders_) {
      AllreduceOptions lo = opts;
      lo.algorithm = Algorithm::kAuto;
      lo.timeout_s = limit.left();
      step(*leaders_, [&] { ::dtrain::allreduce(*leaders_, buf, count, t, partial, lo); });
    }
    BroadcastOptions bo;
    bo.timeout_s = limit.left();
    bo.segment_bytes = opts.segment_bytes;
    step(*local_, [&] { ::dtrain::broadcast(*local_, buf, count, t, 0, bo); });
  }
  if (op == ReduceOp::kAvg) finish_avg(t, buf, count, comm_.size());
}

void Hierarchy::reduce_scatter(const void* send, void* recv, size_t count, DType t, ReduceOp op, double timeout_s) {
  DT_CHECK(peers_, InvalidArgument, "Hierarchy::reduce_scatter: the hosts have unequal numbers of ranks");
  const ReduceOp partial = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  const size_t es = dtype_size(t), b = count * es, L = by_local_.size(), H = static_cast<size_t>(hosts_);
  packed_.resize(L * H * b);
  block_.resize(H * b);
  const char* in = static_cast<const char*>(send);
  for (size_t j = 0; j < L; ++j)
    for (size_t k = 0; k < H; ++k)
      copy_bytes(packed_.data() + (j * H + k) * b, in + static_cast<size_t>(by_local_[j][k]) * b, b);
  const StepLimit limit(timeout_s);
  ReduceScatterOptions o;
  o.timeout_s = limit.left();
  o.scratch_send = true;  // packed_ and block_ are this object's own
  step(*local_, [&] { ::dtrain::reduce_scatter(*local_, packed_.data(), block_.data(), H * count, t, partial, o); });
  o.timeout_s = limit.left();
  step(*peers_, [&] { ::dtrain::reduce_scatter(*peers_, block_.data(), recv, count, t, partial, o); });
  if (op == ReduceOp::kAvg) finish_avg(t, recv, count, comm_.size());
}

void Hierarchy::allgather(const void* send, void* recv, size_t count, DType t, double timeout_s) {
  DT_CHECK(peers_, InvalidArgument, "Hierarchy::allgather: the hosts have unequal numbers of ranks");
  const size_t es = dtype_size(t), b = count * es, L = by_local_.size(), H = static_cast<size_t>(hosts_);
  packed_.resize(L * H * b);
  block_.resize(H * b);
  const StepLimit limit(timeout_s);
  AllgatherOptions o;
  o.timeout_s = limit.left();
  step(*peers_, [&] { ::dtrain::allgather(*peers_, send, block_.data(), count, t, o); });
  o.timeout_s = limit.left();
  step(*local_, [&] { ::dtrain::allgather(*local_, block_.data(), packed_.data(), H * count, t, o); });
  char* out = static_cast<char*>(recv);
  for (size_t j = 0; j < L; ++j)
    for (size_t k = 0; k < H; ++k)
      copy_bytes(out + static_cast<size_t>(by_local_[j][k]) * b, packed_.data() + (j * H + k) * b, b);
}

namespace {

// A communicator's hosts, found once, and its hierarchy once one is asked for.
struct HostHierarchy {
  std::vector<int> host_of;
  int hosts = 0;
  std::unique_ptr<Hierarchy> hierarchy;
};

HostHierarchy& host_hierarchy_of(Communicator& comm, double timeout_s) {
  // Made empty under the attachments' lock, filled outside it (host_indices is a collective
  // of this communicator; collectives on it come one at a time).
  HostHierarchy& h = *comm.attachment<HostHierarchy>("coll/host-hierarchy", [] { return std::make_shared<HostHierarchy>(); });
  if (h.hosts > 0) return h;
  h.host_of = host_indices(comm, hierarchy_host_id(comm.coll_config()), timeout_s);
  h.hosts = *std::max_element(h.host_of.begin(), h.host_of.end()) + 1;
  return h;
}

}  // namespace

Hierarchy* host_hierarchy(Communicator& comm, double timeout_s) {
  if (comm.size() <= 2 || std::string(comm.transport().kind()) == "shm") return nullptr;
  HostHierarchy& h = host_hierarchy_of(comm, timeout_s);
  if (h.hosts <= 1 || h.hosts >= comm.size()) return nullptr;
  if (!h.hierarchy) h.hierarchy = std::make_unique<Hierarchy>(comm, h.host_of);
  return h.hierarchy.get();
}

void allreduce_hierarchical_once(Call& call, char* buf, size_t count) {
  HostHierarchy& h = host_hierarchy_of(call.comm(), call.remaining());
  if (!h.hierarchy) h.hierarchy = std::make_unique<Hierarchy>(call.comm(), h.host_of);
  AllreduceOptions opts;
  opts.timeout_s = call.remaining();
  opts.segment_bytes = call.segment_elems() * call.elem();
  // kAvg's division is done by the caller (allreduce) over the whole group.
  ReduceOp op = call.redop() == ReduceOp::kAvg ? ReduceOp::kSum : call.redop();
  h.hierarchy->allreduce(buf, count, call.dtype(), op, opts);
}

}  // namespace dtrain
