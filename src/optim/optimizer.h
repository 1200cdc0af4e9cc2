// optim/optimizer.h — optimizers over flat spans, steppable by range, with saveable state.
//
// Contract
// - An Optimizer manages a contiguous range of `size()` elements of a flat parameter buffer
//   (the whole model, or a ZeRO / parameter-server shard [offset, offset + size)). Its state
//   (momentum, Adam moments) is sized to that range. step(params, grads) takes the spans OF
//   THAT RANGE (length == size(), InvalidArgument otherwise); the caller slices:
//       opt.step(all_params.subspan(offset, len), all_grads.subspan(offset, len));
//   Stepping ranges [0, a) and [a, n) with two optimizers equals stepping [0, n) with one,
//   bit for bit (every update is element-wise).
// - A step may also come in pieces (a fused all-reduce hands each reduced piece over as it
//   is ready): update(params, grads, offset) updates elements [offset, offset + len) of the
//   range, with the state at the same offsets, as the step in progress would; end_step()
//   then counts the step. Each element at most once per step, in any order; step(p, g) is
//   update(p, g, 0) followed by end_step(), bit for bit.
// - update_sum(out, params, terms, offset) is such a piece whose gradient is the sum of
//   terms (arrays of params.size() floats, added in their order: the ranks' contributions,
//   where a fused all-reduce reads them where they lie), with the stepped parameters written
//   to out: params itself (in place) or a buffer apart from it (params only read). Bit for
//   bit: the terms summed in order into a buffer g, params copied to out, update(out, g,
//   offset). SGD does it in one pass over its inputs; the others through a small buffer.
// - lr() is the learning rate the next step uses; a schedule sets it: set_lr(s.at(step)).
// - steps() counts completed steps (Adam's bias correction uses it).
// - save_state() serializes kind, size, step count, hyper-parameters and state arrays;
//   load_state() restores them exactly and throws Corrupt / InvalidArgument if the bytes are
//   for another kind or size.
// - An optional ThreadPool splits the update (deterministically) across threads.
// Thread-safety: one caller at a time per Optimizer; different Optimizers over disjoint
// ranges may step concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/aligned.h"

namespace dtrain {

class ThreadPool;

class Optimizer {
 public:
  static constexpr size_t kMaxTerms = 64;  // update_sum's terms at most
  virtual ~Optimizer() = default;

  void step(std::span<float> params, std::span<const float> grads);
  // One piece of the step in progress: [offset, offset + params.size()) of the range.
  virtual void update(std::span<float> params, std::span<const float> grads, int64_t offset) = 0;
  virtual void update_sum(std::span<float> out, std::span<const float> params, std::span<const float* const> terms,
                          int64_t offset);
  void end_step() { ++steps_; }
  // Short name: "sgd", "adam", "adamw".
  virtual const char* kind() const = 0;

  int64_t size() const { return size_; }
  int64_t steps() const { return steps_; }
  float lr() const { return lr_; }
  void set_lr(float lr) { lr_ = lr; }
  void set_pool(ThreadPool* pool) { pool_ = pool; }

  std::vector<uint8_t> save_state() const;
  void load_state(std::span<const uint8_t> bytes);

 protected:
  Optimizer(int64_t size, float lr);
  void check_spans(std::span<float> params, std::span<const float> grads) const;
  void check_piece(std::span<float> params, std::span<const float> grads, int64_t offset) const;
  void check_terms(std::span<const float* const> terms) const;
  // State arrays, each of size() floats, in a fixed order, and scalar hyper-parameters.
  virtual std::vector<AlignedVector<float>*> state_arrays() = 0;
  virtual std::vector<float> hyper_params() const = 0;
  virtual void set_hyper_params(std::span<const float> values) = 0;

  int64_t size_;
  int64_t steps_ = 0;
  float lr_;
  ThreadPool* pool_ = nullptr;
};

// Everything a command line or config file can say about an optimizer.
struct OptimizerConfig {
  std::string kind = "sgd";  // sgd | adam | adamw
  float lr = 0.01f;
  float momentum = 0.0f;  // sgd
  bool nesterov = false;  // sgd
  float weight_decay = 0.0f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adam, adamw
};

// Builds the optimizer for a range of `size` elements; throws InvalidArgument for an
// unknown kind or invalid hyper-parameters.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, int64_t size);

}  // namespace dtrain
