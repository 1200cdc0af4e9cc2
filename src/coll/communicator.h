// coll/communicator.h — a group of ranks that talk: point-to-point, barrier, split.
//
// Contract
// - A Communicator is created collectively (every member calls the constructor or split with
//   matching arguments, in the same order) and owns one Transport among its members.
// - rank() is this process's index in the group, size() the group's size; world_rank(r) maps a
//   group rank to the rank in the job (error messages name both when they differ).
// - send/recv/isend/irecv carry a user tag < 2^32; tags at or above 2^32 are reserved for
//   collectives, which draw them from next_sequence() (one number per collective call, so
//   concurrent collectives never mix messages) through collective_tag(seq, step).
// - recv/irecv from kAnySource (comm/transport.h) take the next message with the tag from any
//   rank of the group; recv returns the sender's rank, Request::source() says it after the
//   wait. probe(tag) says without blocking which rank has such a message waiting (and its
//   size). A peer that fails while an any-source receive waits fails it (PeerFailure naming
//   the peer); a timeout says no rank sent a message with the tag.
// - barrier() is a dissemination barrier: ceil(log2 p) rounds of one send and one receive.
// - split(color, key) makes sub-groups of the ranks with equal color, ordered by (key, rank),
//   each with its own transport (so a sub-group of one host can use shm while the parent uses
//   tcp). color < 0 returns nullptr (not in any group). Every rank of the parent must call it.
//   split_auto(color, key) is split whose sub-groups choose their transport as kAuto does
//   (shm among ranks of one host), whatever kind the parent was given.
// - Every blocking call is bounded by timeout() (from DTRAIN_TIMEOUT or the constructor);
//   coll_config() is the collectives' configuration (coll/config.h), handed on by split().
// - attachment<T>(key, make) keeps per-communicator state that higher layers build once and
//   find again (the collectives' shared-memory context, a cached hierarchy): the object stored
//   under key, created by make() on first use. When make() is itself collective, every rank
//   must reach the first use at the same point (e.g. inside the same collective call).
// Thread-safety: p2p calls may come from several threads; collectives on one communicator
// must be issued in the same order on every rank; attachment() is serialised internally.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "coll/config.h"
#include "comm/store.h"
#include "comm/transport.h"
#include "comm/world.h"

namespace dtrain {

class ShmContext;

class Communicator {
 public:
  // Collective over the ranks of `store` (which this communicator namespaces under `name`).
  Communicator(std::shared_ptr<Store> store, int rank, int size, const TransportOptions& opts,
               std::string name = "world", std::vector<int> world_ranks = {}, CollConfig coll = {});
  // The job's world, from the environment and the settings (see comm/world.h, coll/config.h):
  // from_world(world_from_env(settings), settings).
  static std::shared_ptr<Communicator> from_env(const Settings& settings = Settings::process());
  // The job's world as `info` describes it (e.g. the settings', with a program's flags applied
  // over it); opens the rendezvous (open_world_store) and the transport.
  static std::shared_ptr<Communicator> from_world(WorldInfo info, const Settings& settings = Settings::process());

  int rank() const { return rank_; }
  int size() const { return size_; }
  int world_rank(int r) const { return world_ranks_.empty() ? r : world_ranks_[r]; }
  double timeout() const { return opts_.timeout_s; }
  const std::string& name() const { return name_; }
  Transport& transport() { return *transport_; }
  Store& store() { return *store_; }
  // The store of the communicator this one was split from, first of all (its own for a
  // world): where the world's transport published each world rank's host.
  Store& world_store() { return world_store_ ? *world_store_ : *store_; }
  const TransportOptions& options() const { return opts_; }
  const CollConfig& coll_config() const { return coll_; }

  void send(int peer, const void* data, size_t bytes, uint32_t tag = 0);
  // Returns the rank the message came from (peer, unless peer is kAnySource).
  int recv(int peer, void* data, size_t bytes, uint32_t tag = 0);
  Request isend(int peer, const void* data, size_t bytes, uint32_t tag = 0);
  Request irecv(int peer, void* data, size_t bytes, uint32_t tag = 0);
  ProbeResult probe(uint32_t tag = 0);

  void barrier();
  std::shared_ptr<Communicator> split(int color, int key) { return split_with(color, key, opts_); }
  std::shared_ptr<Communicator> split_auto(int color, int key);

  // The shared-memory context built with this communicator (coll/shm_context.h), or null:
  // the collectives' fast paths find it here without a lookup.
  ShmContext* shm_context() const { return shm_context_; }

  uint64_t next_sequence() { return sequence_.fetch_add(1, std::memory_order_relaxed); }
  // Numbers internal set-up steps that meet through the store (a shared-memory context's keys)
  // without shifting the collectives' sequence numbers, which errors and traces name.
  uint64_t next_setup_sequence() { return setup_sequence_.fetch_add(1, std::memory_order_relaxed); }
  static uint64_t collective_tag(uint64_t seq, uint32_t step) {
    return (uint64_t{1} << 63) | ((seq & ((uint64_t{1} << 39) - 1)) << 24) | (step & 0xffffff);
  }

  // Keeps an object (e.g. the store server rank 0 hosts) alive as long as this communicator.
  void keep_alive(std::shared_ptr<void> p) { keepalive_.push_back(std::move(p)); }

  template <class T, class Make>
  std::shared_ptr<T> attachment(const std::string& key, Make&& make) {
    std::lock_guard<std::mutex> lock(attachments_mu_);
    auto it = attachments_.find(key);
    if (it != attachments_.end()) return std::static_pointer_cast<T>(it->second);
    std::shared_ptr<T> made = make();
    attachments_[key] = made;
    return made;
  }

 private:
  void check_peer(int peer, const char* what, bool any_ok = false) const;
  std::shared_ptr<Communicator> split_with(int color, int key, const TransportOptions& opts);

  std::shared_ptr<Store> base_store_;
  std::shared_ptr<Store> store_;
  std::shared_ptr<Store> world_store_;  // null: this is the world (store_)
  int rank_, size_;
  TransportOptions opts_;
  CollConfig coll_;
  std::string name_;
  std::vector<int> world_ranks_;
  std::unique_ptr<Transport> transport_;
  std::atomic<uint64_t> sequence_{0};
  std::atomic<uint64_t> setup_sequence_{0};
  ShmContext* shm_context_ = nullptr;  // owned by attachments_
  int splits_ = 0;
  std::vector<std::shared_ptr<void>> keepalive_;
  std::mutex attachments_mu_;
  std::map<std::string, std::shared_ptr<void>> attachments_;  // last: destroyed first
};

}  // namespace dtrain
