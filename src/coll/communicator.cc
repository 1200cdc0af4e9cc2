#include "coll/communicator.h"
#include "coll/shm_context.h"

#include <algorithm>
#include <sstream>

#include "base/error.h"
#include "base/log.h"
#include "comm/heartbeat.h"

namespace dtrain {

Communicator::Communicator(std::shared_ptr<Store> store, int rank, int size, const TransportOptions& opts,
                           std::string name, std::vector<int> world_ranks, CollConfig coll)
    : base_store_(store),
      store_(std::make_shared<PrefixStore>(name, store)),
      rank_(rank),
      size_(size),
      opts_(opts),
      coll_(std::move(coll)),
      name_(std::move(name)),
      world_ranks_(std::move(world_ranks)) {
  DT_CHECK(size >= 1 && rank >= 0 && rank < size, InvalidArgument,
           "communicator '" << name_ << "': rank " << rank << " outside a group of size " << size);
  auto transport_store = std::make_shared<PrefixStore>("transport", store_);
  transport_ = Transport::create(*transport_store, rank, size, opts);
  // The collectives' shared-memory context (coll/shm_context.h) is built here, with the
  // transport, not at the first collective: a rank that skips a collective or dies later meets
  // the fingerprint exchange and the liveness checks, never a half-built context.
  if (size_ > 1 && coll_.shm_context && std::string(transport_->kind()) == "shm")
    shm_context_ = attachment<ShmContext>(kShmContextKey, [&] { return std::make_shared<ShmContext>(*this, coll_.shm_slot_bytes); }).get();
}

std::shared_ptr<Communicator> Communicator::from_env(const Settings& settings) {
  return from_world(world_from_env(settings), settings);
}

std::shared_ptr<Communicator> Communicator::from_world(WorldInfo info, const Settings& settings) {
  std::shared_ptr<void> keepalive;
  auto store = open_world_store(info, &keepalive);
  auto comm = std::make_shared<Communicator>(store, info.rank, info.size, info.transport, "world",
                                             std::vector<int>{}, coll_config_from(settings));
  if (keepalive) comm->keep_alive(keepalive);
  DT_LOG(Info) << "rank " << info.rank << " of " << info.size << " (" << info.launched_by << ", " << info.hosts
               << " host(s)): transport " << comm->transport().kind() << ", timeout " << info.transport.timeout_s
               << " s, tcp address " << info.transport.fabric.bind_host;
  // Under dtrain's launcher: beat while this rank is part of the job (comm/heartbeat.h).
  if (std::shared_ptr<Heartbeat> beat = heartbeat_from_env()) comm->keep_alive(beat);
  return comm;
}

void Communicator::check_peer(int peer, const char* what, bool any_ok) const {
  if (any_ok && peer == kAnySource) return;
  DT_CHECK(peer >= 0 && peer < size_, InvalidArgument,
           "rank " << rank_ << ": " << what << " peer " << peer << " is outside communicator '" << name_
                   << "' of size " << size_);
}

void Communicator::send(int peer, const void* data, size_t bytes, uint32_t tag) {
  check_peer(peer, "send to");
  transport_->send(peer, tag, data, bytes);
}
int Communicator::recv(int peer, void* data, size_t bytes, uint32_t tag) {
  check_peer(peer, "recv from", true);
  return transport_->recv(peer, tag, data, bytes);
}
Request Communicator::isend(int peer, const void* data, size_t bytes, uint32_t tag) {
  check_peer(peer, "isend to");
  return transport_->isend(peer, tag, data, bytes);
}
Request Communicator::irecv(int peer, void* data, size_t bytes, uint32_t tag) {
  check_peer(peer, "irecv from", true);
  return transport_->irecv(peer, tag, data, bytes);
}
ProbeResult Communicator::probe(uint32_t tag) { return transport_->probe(tag); }

// Dissemination barrier (Hensgen, Finkel, Manber 1988): in round k every rank signals rank
// (r + 2^k) mod p and waits for rank (r - 2^k) mod p. After ceil(log2 p) rounds each rank
// has heard, directly or through others, from every rank — so none leaves before all arrived.
void Communicator::barrier() {
  uint64_t seq = next_sequence();
  char token = 1, got = 0;
  uint32_t round = 0;
  for (int dist = 1; dist < size_; dist *= 2, ++round) {
    int to = (rank_ + dist) % size_;
    int from = (rank_ - dist + size_) % size_;
    uint64_t tag = collective_tag(seq, round);
    Request r = transport_->irecv(from, tag, &got, 1);
    Request s = transport_->isend(to, tag, &token, 1);
    Request both[] = {s, r};
    Transport::wait_all(both);
  }
}

std::shared_ptr<Communicator> Communicator::split_auto(int color, int key) {
  TransportOptions o = opts_;
  o.kind = TransportKind::kAuto;
  return split_with(color, key, o);
}

std::shared_ptr<Communicator> Communicator::split_with(int color, int key, const TransportOptions& opts) {
  int n = splits_++;
  std::string base = "split" + std::to_string(n);
  store_->set(base + "/" + std::to_string(rank_), std::to_string(color) + " " + std::to_string(key));
  std::vector<std::string> keys;
  for (int r = 0; r < size_; ++r) keys.push_back(base + "/" + std::to_string(r));
  store_->wait(keys, opts_.fabric.connect_timeout_s);
  struct Member {
    int key, rank;
  };
  std::vector<Member> members;
  for (int r = 0; r < size_; ++r) {
    std::istringstream in(store_->get(base + "/" + std::to_string(r)));
    int c, k;
    in >> c >> k;
    if (c == color && color >= 0) members.push_back({k, r});
  }
  if (color < 0) return nullptr;
  std::sort(members.begin(), members.end(),
            [](const Member& a, const Member& b) { return a.key != b.key ? a.key < b.key : a.rank < b.rank; });
  int new_rank = -1;
  std::vector<int> world;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].rank == rank_) new_rank = static_cast<int>(i);
    world.push_back(world_rank(members[i].rank));
  }
  std::string child = name_ + "/" + base + "c" + std::to_string(color);
  // The child's store namespace hangs off the same base store, under the child's full name.
  auto made = std::make_shared<Communicator>(base_store_, new_rank, static_cast<int>(members.size()), opts, child, world, coll_);
  made->world_store_ = world_store_ ? world_store_ : store_;
  return made;
}

}  // namespace dtrain
