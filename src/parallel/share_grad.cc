#include "parallel/share_grad.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "data/sampler.h"

namespace dtrain {

void add_fixed(std::span<const float> x, double weight, std::span<int64_t> acc) {
  DT_CHECK(x.size() == acc.size(), InvalidArgument, "add_fixed: " << x.size() << " values for " << acc.size());
  const double scale = weight * std::ldexp(1.0, kFixedShift);
  constexpr double kLimit = 1048576.0;  // 2^20: room for 2^3 summands below 2^63
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = static_cast<double>(x[i]) * weight;
    DT_CHECK(std::fabs(v) < kLimit, InvalidArgument,
             "deterministic mode: gradient value " << v << " at index " << i
                                                   << " is outside the fixed-point range (|g| < 2^20); the run is "
                                                      "diverging, lower --lr");
    acc[i] += std::llrint(static_cast<double>(x[i]) * scale);
  }
}

void fixed_to_float(std::span<const int64_t> acc, std::span<float> out) {
  DT_CHECK(acc.size() == out.size(), InvalidArgument, "fixed_to_float: size mismatch");
  const double inv = std::ldexp(1.0, -kFixedShift);
  for (size_t i = 0; i < acc.size(); ++i) out[i] = static_cast<float>(static_cast<double>(acc[i]) * inv);
}

ShareGradient::ShareGradient(TrainableModel& model, const ShareOptions& options)
    : model_(model), opt_(options), replica_(model.make_replica()) {
  DT_CHECK(opt_.det_shard >= 1, InvalidArgument, "deterministic micro-shard size must be >= 1");
  const int64_t n = model.num_params();
  units_ = replica_->grad_units(n);
  grad_.resize(static_cast<size_t>(n));
  if (opt_.deterministic) {
    scratch_.resize(static_cast<size_t>(n));
    fixed_.resize(static_cast<size_t>(n));
  }
}

LossAcc ShareGradient::compute(std::span<const float> params, std::span<const int64_t> global_batch, int rank,
                               int world, const GradReadyFn& ready) {
  return compute(params, global_batch, data::batch_share(static_cast<int64_t>(global_batch.size()), rank, world, granule()),
                 ready);
}

LossAcc ShareGradient::compute(std::span<const float> params, std::span<const int64_t> global_batch,
                               std::pair<int64_t, int64_t> share, const GradReadyFn& ready) {
  const auto b = static_cast<int64_t>(global_batch.size());
  DT_CHECK(b >= 1, InvalidArgument, "empty minibatch");
  const auto [lo, hi] = share;
  DT_CHECK(0 <= lo && lo <= hi && hi <= b && (!opt_.deterministic || lo % opt_.det_shard == 0), InvalidArgument,
           "ShareGradient: share [" << lo << ", " << hi << ") of a batch of " << b
                                    << (opt_.deterministic ? " (deterministic mode: starting at a micro-shard)" : ""));
  std::span<const int64_t> mine = global_batch.subspan(static_cast<size_t>(lo), static_cast<size_t>(hi - lo));
  const double inv_b = 1.0 / static_cast<double>(b);

  if (!opt_.deterministic) {
    // One backward over the whole share, seeded with n_r / B so the gradient comes out
    // weighted (a separate scaling pass over the gradient cost ~5% of a ddp step).
    const float w = static_cast<float>(static_cast<double>(mine.size()) * inv_b);
    return replica_->loss_grad_staged(params, mine, grad(), ready, w);
  }

  // Deterministic: micro-shards of det_shard items, each added in fixed point with weight
  // n_k / B. The last micro-shard runs staged so its units can be reported as they finish.
  std::fill(fixed_.begin(), fixed_.end(), int64_t{0});
  LossAcc total;
  total.examples = static_cast<int64_t>(mine.size());
  const int64_t m = static_cast<int64_t>(mine.size());
  const int64_t u = opt_.det_shard;
  for (int64_t first = 0; first < m; first += u) {
    const int64_t len = std::min(u, m - first);
    std::span<const int64_t> shard = mine.subspan(static_cast<size_t>(first), static_cast<size_t>(len));
    const double w = static_cast<double>(len) * inv_b;
    LossAcc r;
    if (first + len < m) {
      r = replica_->loss_grad(params, shard, scratch_);
      add_fixed(scratch_, w, fixed_);
    } else {
      r = replica_->loss_grad_staged(
          params, shard, scratch_,
          [&](GradRange unit) {
            auto off = static_cast<size_t>(unit.offset), n = static_cast<size_t>(unit.len);
            add_fixed(std::span<const float>(scratch_).subspan(off, n), w, std::span<int64_t>(fixed_).subspan(off, n));
            if (ready) ready(unit);
          },
          1.0f);
    }
    total.loss += r.loss * static_cast<double>(len);
    total.correct += r.correct;
  }
  if (m == 0 && ready)
    for (const GradRange& unit : units_) ready(unit);
  if (m > 0) total.loss /= static_cast<double>(m);
  return total;
}

void ShareGradient::place_grad(std::span<float> storage) {
  DT_CHECK(storage.size() == grad_.size() || (!placed_.empty() && storage.size() == placed_.size()), InvalidArgument,
           "ShareGradient::place_grad: " << storage.size() << " floats for a gradient of " << model_.num_params());
  placed_ = storage;
  AlignedVector<float>().swap(grad_);
}

GradBuckets::GradBuckets(const std::vector<GradRange>& units, size_t cap_bytes, size_t elem_bytes) : units_(units) {
  DT_CHECK(!units.empty(), InvalidArgument, "GradBuckets: no gradient units");
  GradRange cur{units[0].offset + units[0].len, 0};  // grows downwards (units in backward order)
  size_t bytes = 0;
  for (size_t i = 0; i < units.size(); ++i) {
    const GradRange& u = units[i];
    DT_CHECK(u.offset + u.len == cur.offset, InvalidArgument,
             "GradBuckets: units must be contiguous and in backward order (unit " << i << ")");
    cur.offset = u.offset;
    cur.len += u.len;
    bytes += static_cast<size_t>(u.len) * elem_bytes;
    if (bytes >= cap_bytes || i + 1 == units.size()) {
      buckets_.push_back(cur);
      last_unit_of_bucket_.push_back(static_cast<int>(i));
      cur = GradRange{u.offset, 0};
      bytes = 0;
    }
  }
}

int GradBuckets::on_ready(GradRange unit) {
  DT_CHECK(next_unit_ < units_.size() && units_[next_unit_].offset == unit.offset, Error,
           "GradBuckets: unit at offset " << unit.offset << " reported out of order");
  const size_t i = next_unit_++;
  if (next_unit_ == units_.size()) next_unit_ = 0;
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (last_unit_of_bucket_[b] == static_cast<int>(i)) return static_cast<int>(b);
  return -1;
}

}  // namespace dtrain
