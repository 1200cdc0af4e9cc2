// parallel/share_grad.h — one rank's share of a global minibatch gradient, and gradient buckets.
//
// Synchronous data parallelism (ddp, sync ps, localsgd, gossip) computes, at every step t,
// the mean gradient of the global minibatch t (B items of the epoch order, the same on every
// rank) as a SUM of per-rank contributions:
//     g = sum_r c_r,   c_r = (n_r / B) * (mean gradient of rank r's n_r items)
// where rank r's items are data::batch_share(B, r, M, granule) — contiguous, in rank order,
// so the union over ranks is exactly the single-process minibatch.
//
// Deterministic mode makes the sum independent of M and of the reduction algorithm, so that M
// ranks with batch B/M produce the same bits as one rank with batch B:
//  1. The batch is cut into fixed micro-shards of `det_shard` items (granule = det_shard);
//     each micro-shard's mean gradient g_k is computed on its own (same rows, same gemm
//     shapes, whatever the rank count), and weighted by n_k / B.
//  2. Each weighted value is converted to 64-bit fixed point, round(x * 2^40) (|x| < 2^20 is
//     checked). Integer addition is associative, so summing the micro-shards on a rank and
//     then across ranks (an int64 all-reduce, any algorithm) gives the same integers as one
//     rank summing them all; the result is converted back to float once.
//  The resolution 2^-40 (~1e-12) is far below float32's precision for any gradient that
//  matters; the cost is twice the bytes on the wire, so this mode is for verification.
//
// Buckets. The gradient is reported in units (an MLP: one layer, last layer first, as
// backward finishes them). GradBuckets groups consecutive units until a bucket holds at least
// `cap_bytes`; a bucket is ready when its last unit is, and its all-reduce can start while
// backward continues on the earlier layers. Every rank builds the same buckets from the same
// units, so the collectives line up.
//
// Thread-safety: a ShareGradient belongs to one training thread; the ready callback runs on
// it. The buffers it exposes may be read by a progress thread between the ready call for a
// range and the next compute().
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "base/aligned.h"
#include "parallel/threads_model.h"

namespace dtrain {

constexpr int kFixedShift = 40;

// acc[i] += round(x[i] * weight * 2^40); throws InvalidArgument (naming the index and value)
// when a term is out of range (a diverging run).
void add_fixed(std::span<const float> x, double weight, std::span<int64_t> acc);
// out[i] = acc[i] * 2^-40, rounded to float.
void fixed_to_float(std::span<const int64_t> acc, std::span<float> out);

struct ShareOptions {
  bool deterministic = false;
  int64_t det_shard = 8;  // items per micro-shard in deterministic mode
};

class ShareGradient {
 public:
  ShareGradient(TrainableModel& model, const ShareOptions& options);

  // This rank's contribution c_r for `global_batch` (the whole step's items; this rank takes
  // its share). Normal mode fills grad(), deterministic mode fixed(). `ready` is called with
  // each unit (grad_units order) once its range of the output is final. Returns the mean
  // loss / correct count over this rank's items (examples = their number).
  LossAcc compute(std::span<const float> params, std::span<const int64_t> global_batch, int rank, int world,
                  const GradReadyFn& ready);
  // The same for an explicit share [first, last) of global_batch (parallel/batch_split.h); in
  // deterministic mode it must start at a multiple of det_shard.
  LossAcc compute(std::span<const float> params, std::span<const int64_t> global_batch,
                  std::pair<int64_t, int64_t> share, const GradReadyFn& ready);
  // Deterministic mode: grad() = fixed() * 2^-40 (after the fixed-point sum is complete).
  void finish_fixed() { fixed_to_float(fixed_, grad()); }

  std::span<float> grad() { return placed_.empty() ? std::span<float>(grad_) : placed_; }
  // Keeps the gradient in `storage` (num_params() floats the caller keeps alive, e.g. a shared
  // memory window the peers read from) instead of its own buffer, which it frees.
  void place_grad(std::span<float> storage);
  std::span<int64_t> fixed() { return fixed_; }
  const std::vector<GradRange>& units() const { return units_; }
  bool deterministic() const { return opt_.deterministic; }
  int64_t granule() const { return opt_.deterministic ? opt_.det_shard : 1; }

 private:
  TrainableModel& model_;
  ShareOptions opt_;
  std::unique_ptr<Replica> replica_;
  std::vector<GradRange> units_;
  AlignedVector<float> grad_, scratch_;  // kernels write them whole: cache-line aligned
  std::span<float> placed_;              // place_grad's storage, used instead of grad_
  std::vector<int64_t> fixed_;
};

class GradBuckets {
 public:
  GradBuckets(const std::vector<GradRange>& units, size_t cap_bytes, size_t elem_bytes);
  const std::vector<GradRange>& buckets() const { return buckets_; }
  // A unit finished (units arrive in order). Returns the bucket it completes, or -1.
  int on_ready(GradRange unit);
  void reset() { next_unit_ = 0; }

 private:
  std::vector<GradRange> buckets_;
  std::vector<int> last_unit_of_bucket_;  // unit index that completes bucket b
  std::vector<GradRange> units_;
  size_t next_unit_ = 0;
};

}  // namespace dtrain
