#include "parallel/fedavg.h"

#include <algorithm>
#include <cmath>

#include "base/clock.h"
#include "base/copy.h"
#include "base/error.h"
#include "data/rng.h"
#include "data/sampler.h"

namespace dtrain {
namespace {
uint64_t client_seed(uint64_t seed, int k) { return seed + static_cast<uint64_t>(k) * 0x9E3779B97F4A7C15ull; }
}  // namespace

FedAvg::FedAvg(TrainableModel& model, Communicator& comm, const FedAvgOptions& options, const float* lr,
               Instrument* inst)
    : ModelStrategy(model, nullptr), comm_(comm), o_(options), lr_(lr), inst_(inst), replica_(model.make_replica()),
      evaluator_(comm) {
  DT_CHECK(o_.clients >= 1, InvalidArgument, "--clients must be >= 1");
  DT_CHECK(o_.fraction > 0 && o_.fraction <= 1, InvalidArgument, "--client-fraction must be in (0, 1]");
  DT_CHECK(o_.local_epochs >= 1, InvalidArgument, "--local-epochs must be >= 1");
  const data::Dataset& train = model.train_set();
  parts_ = o_.dirichlet > 0
               ? data::dirichlet_partition(train.labels, train.num_classes, o_.clients, o_.dirichlet, o_.seed)
               : data::iid_partition(train.rows, o_.clients, o_.seed);
  const auto p = static_cast<size_t>(model.num_params());
  global_.resize(p);
  grad_.resize(p);
  sum_.resize(p);
  blocking_broadcast(comm_, inst_, "broadcast-params", model_.params().data(), p, DType::kFloat32, 0);
}

std::vector<int> fedavg_sample(int clients, double fraction, uint64_t seed, int64_t round) {
  const int m = std::max(1, static_cast<int>(std::lround(fraction * clients)));
  std::vector<int64_t> perm = data::epoch_permutation(clients, seed ^ 0xfedull, round);
  std::vector<int> s(perm.begin(), perm.begin() + std::min(m, clients));
  std::sort(s.begin(), s.end());
  return s;
}

std::vector<int> FedAvg::sample(int64_t round) const { return fedavg_sample(o_.clients, o_.fraction, o_.seed, round); }

LossAcc FedAvg::run_epoch(std::span<const int64_t>, int64_t batch, const ProgressFn& progress) {
  DT_CHECK(batch >= 1, InvalidArgument, "--batch must be >= 1, got " << batch);
  std::span<float> w = model_.params();
  copy_elements(global_.data(), w.data(), w.size());
  std::fill(sum_.begin(), sum_.end(), 0.0f);
  const std::vector<int> clients = sample(round_);
  int64_t n_s = 0;
  for (int k : clients) n_s += static_cast<int64_t>(parts_[static_cast<size_t>(k)].size());
  sampled_ = static_cast<int64_t>(clients.size());
  round_examples_ = n_s * o_.local_epochs;

  LossAcc local;
  int64_t mine_total = 0;
  for (int k : clients)
    if (k % comm_.size() == comm_.rank()) mine_total += static_cast<int64_t>(parts_[static_cast<size_t>(k)].size());
  mine_total *= o_.local_epochs;
  for (int k : clients) {
    if (k % comm_.size() != comm_.rank()) continue;
    const std::vector<int64_t>& ids = parts_[static_cast<size_t>(k)];
    if (ids.empty()) continue;
    Instrument::Scope s(inst_, "client update", SpanKind::kCompute);
    std::copy(global_.begin(), global_.end(), w.begin());
    std::unique_ptr<Optimizer> opt = make_optimizer(o_.optimizer, model_.num_params());
    opt->set_lr(*lr_);
    const auto n = static_cast<int64_t>(ids.size());
    for (int64_t e = 0; e < o_.local_epochs; ++e) {
      const std::vector<int64_t> perm = data::epoch_permutation(n, client_seed(o_.seed, k), round_ * o_.local_epochs + e);
      std::vector<int64_t> order(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) order[i] = ids[static_cast<size_t>(perm[i])];
      for (int64_t first = 0; first < n; first += batch) {
        const int64_t len = std::min(batch, n - first);
        LossAcc r = replica_->loss_grad(w, std::span<const int64_t>(order).subspan(static_cast<size_t>(first),
                                                                                   static_cast<size_t>(len)),
                                        grad_);
        opt->step(w, grad_);
        local.loss += r.loss * static_cast<double>(r.examples);
        local.correct += r.correct;
        local.examples += r.examples;
        if (progress && mine_total > 0)
          progress(local.examples * model_.train_set().rows / mine_total,
                   local.loss / static_cast<double>(local.examples));
      }
    }
    const auto weight = static_cast<float>(static_cast<double>(n) / static_cast<double>(n_s));
    for (size_t i = 0; i < sum_.size(); ++i) sum_[i] += weight * w[i];
  }
  // Server: the weighted average, summed over ranks in rank order.
  AllreduceOptions o;
  o.deterministic = true;
  blocking_allreduce(comm_, inst_, "average clients", sum_.data(), sum_.size(), DType::kFloat32, ReduceOp::kSum, o);
  std::copy(sum_.begin(), sum_.end(), w.begin());
  if (local.examples) local.loss /= static_cast<double>(local.examples);
  return sum_stats(comm_, local);
}

}  // namespace dtrain
