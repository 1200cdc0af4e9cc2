#include "parallel/param_server.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <thread>

#include "base/clock.h"
#include "base/copy.h"
#include "base/error.h"
#include "tensor/kernels.h"

namespace dtrain {
namespace {
constexpr uint32_t kPushTag = 0x7050;
constexpr uint32_t kPullTag = 0x7051;
constexpr uint32_t kReadyTag = 0x7052;  // server -> worker: the first push's receive is posted
// The server sums the pushes this many elements at a time (16 KiB of floats: in L1 with a
// push's block beside it).
constexpr size_t kSumBlock = 4096;
constexpr char kWord = 1;               // the window path's "my slot holds this step's data"
}  // namespace

ParamServer::ParamServer(TrainableModel& model, Communicator& comm, const PsOptions& options, const float* lr,
                         Instrument* inst)
    : ModelStrategy(model, nullptr), comm_(comm), o_(options), lr_(lr), inst_(inst), workers_(comm.size() - options.servers),
      evaluator_(comm) {
  DT_CHECK(o_.servers >= 1 && workers_ >= 1, InvalidArgument,
           "--strategy ps needs at least one server and one worker: -n " << comm.size() << " with --servers "
                                                                          << o_.servers << " leaves " << workers_
                                                                          << " workers; use -n " << o_.servers + 1
                                                                          << " or more");
  DT_CHECK(!o_.deterministic || o_.sync, InvalidArgument, "--deterministic needs --sync for --strategy ps");
  DT_CHECK(model.num_params() >= o_.servers, InvalidArgument, "more servers than parameters");
  if (comm.rank() >= workers_) {
    server_ = comm.rank() - workers_;
    opt_ = make_optimizer(o_.optimizer, range_of(server_).len);
  } else {
    share_ = std::make_unique<ShareGradient>(model, ShareOptions{o_.deterministic, o_.det_shard});
  }
  clock_.assign(static_cast<size_t>(workers_), 0);
  version_sent_.assign(static_cast<size_t>(workers_), 0);
  if (o_.sync && o_.window && comm_.shm_context()) {
    // Every rank maps the same size: a worker's whole gradient (int64 when deterministic);
    // each counts what its role writes.
    const size_t esize = o_.deterministic ? sizeof(int64_t) : sizeof(float);
    window_ = std::make_unique<ShmWindow>(comm_, static_cast<size_t>(model.num_params()) * esize);  // collective
    const int64_t used = is_server() ? range_of(server_).len * static_cast<int64_t>(sizeof(float))
                                     : model.num_params() * static_cast<int64_t>(esize);
    window_counted_ = std::make_unique<CountedAsHeap>(used);
    // A worker's float gradient is computed where the servers read it: no copy into the
    // slot each step, and no gradient buffer of its own. (The slot is rewritten only after
    // the servers' words of the step, sent once they have summed it.)
    if (!is_server() && !o_.deterministic)
      share_->place_grad(
          std::span<float>(reinterpret_cast<float*>(window_->mine()), static_cast<size_t>(model.num_params())));
  }
  broadcast_model();
}

ParamServer::~ParamServer() = default;

GradRange ParamServer::range_of(int s) const {
  const int64_t p = model_.num_params();
  const int64_t lo = p * s / o_.servers, hi = p * (s + 1) / o_.servers;
  return GradRange{lo, hi - lo};
}

void ParamServer::broadcast_model() {
  for (int s = 0; s < o_.servers; ++s) {
    const GradRange r = range_of(s);
    blocking_broadcast(comm_, inst_, "broadcast shard " + std::to_string(s), model_.params().data() + r.offset,
                       static_cast<size_t>(r.len), DType::kFloat32, workers_ + s);
  }
}

LossAcc ParamServer::worker_epoch(std::span<const int64_t> order, int64_t batch, const ProgressFn& progress) {
  LossAcc local;
  const auto n = static_cast<int64_t>(order.size());
  const bool det = o_.deterministic;
  const size_t esize = det ? sizeof(int64_t) : sizeof(float);
  // A server says when its receives for the epoch's first pushes are posted (the first
  // gradient is computed meanwhile); see server_epoch_sync.
  std::vector<char> ready(static_cast<size_t>(o_.servers)), words(static_cast<size_t>(o_.servers));
  std::vector<Request> ready_reqs;
  if (n > 0)
    for (int s = 0; s < o_.servers; ++s) ready_reqs.push_back(comm_.irecv(workers_ + s, &ready[static_cast<size_t>(s)], 1, kReadyTag));
  for (int64_t first = 0; first < n; first += batch) {
    const int64_t len = std::min(batch, n - first);
    std::span<const int64_t> b = order.subspan(static_cast<size_t>(first), static_cast<size_t>(len));
    LossAcc r;
    {
      Instrument::Scope s(inst_, "gradient", SpanKind::kCompute);
      r = share_->compute(model_.params(), b, comm_.rank(), workers_, nullptr);
    }
    for (Request& q : ready_reqs) q.wait();
    ready_reqs.clear();
    const double t0 = now_seconds();
    std::vector<Request> reqs;
    if (window_) {
      // Push: the gradient is in this worker's slot (computed there; the deterministic
      // fixed-point one copied in), a word to each server; pull: each server's word, then
      // its slice out of its slot.
      if (det) copy_memory(window_->mine(), share_->fixed().data(), static_cast<size_t>(model_.num_params()) * esize);
      for (int s = 0; s < o_.servers; ++s) {
        reqs.push_back(comm_.isend(workers_ + s, &kWord, 1, kPushTag));
        reqs.push_back(comm_.irecv(workers_ + s, &words[static_cast<size_t>(s)], 1, kPullTag));
      }
      for (Request& q : reqs) q.wait();
      for (int s = 0; s < o_.servers; ++s) {
        const GradRange rg = range_of(s);
        copy_memory(model_.params().data() + rg.offset, window_->of(workers_ + s), static_cast<size_t>(rg.len) * sizeof(float));
      }
    } else {
      for (int s = 0; s < o_.servers; ++s) {
        const GradRange rg = range_of(s);
        const void* g = det ? static_cast<const void*>(share_->fixed().data() + rg.offset)
                            : static_cast<const void*>(share_->grad().data() + rg.offset);
        reqs.push_back(comm_.isend(workers_ + s, g, static_cast<size_t>(rg.len) * esize, kPushTag));
        reqs.push_back(comm_.irecv(workers_ + s, model_.params().data() + rg.offset,
                                   static_cast<size_t>(rg.len) * sizeof(float), kPullTag));
      }
      for (Request& q : reqs) q.wait();
    }
    if (inst_) {
      const double t1 = now_seconds();
      const int64_t bytes = model_.num_params() * static_cast<int64_t>(esize + sizeof(float));
      inst_->blocking("push+pull", t0, t1, bytes, "\"bytes\":" + std::to_string(bytes));
    }
    local.loss += r.loss * static_cast<double>(r.examples);
    local.correct += r.correct;
    local.examples += r.examples;
    if (progress && local.examples > 0) progress(first + len, local.loss / static_cast<double>(local.examples));
  }
  if (local.examples) local.loss /= static_cast<double>(local.examples);
  return local;
}

void ParamServer::server_epoch_sync(int64_t steps) {
  const GradRange rg = range_of(server_);
  const auto len = static_cast<size_t>(rg.len);
  const bool det = o_.deterministic;
  // Through the window the pushes are read where they lie: no receive buffers.
  const size_t bufs = window_ ? 0 : static_cast<size_t>(workers_);
  std::vector<std::vector<float>> fbuf(det ? 0 : bufs, std::vector<float>(len));
  std::vector<std::vector<int64_t>> ibuf(det ? bufs : 0, std::vector<int64_t>(len));
  std::vector<char> words(static_cast<size_t>(workers_));
  auto pushed_f = [&](int w) {
    return window_ ? reinterpret_cast<const float*>(window_->of(w)) + rg.offset : fbuf[static_cast<size_t>(w)].data();
  };
  auto pushed_i = [&](int w) {
    return window_ ? reinterpret_cast<const int64_t*>(window_->of(w)) + rg.offset : ibuf[static_cast<size_t>(w)].data();
  };
  std::vector<float> grad(len);
  std::vector<int64_t> acc(det ? len : 0);
  std::span<float> mine = model_.params().subspan(static_cast<size_t>(rg.offset), len);
  // The receives of step t + 1 are posted as soon as step t's pushes are summed, before its
  // replies go out: a worker that gets its reply early pushes again at once, and a push with
  // no receive posted is buffered by the transport (a copy of the slice on the heap, copied
  // again later). Posted first, every push lands in place.
  auto post_pushes = [&] {
    std::vector<Request> r;
    for (int w = 0; w < workers_; ++w)
      r.push_back(window_ ? comm_.irecv(w, &words[static_cast<size_t>(w)], 1, kPushTag)
                  : det   ? comm_.irecv(w, ibuf[static_cast<size_t>(w)].data(), len * sizeof(int64_t), kPushTag)
                          : comm_.irecv(w, fbuf[static_cast<size_t>(w)].data(), len * sizeof(float), kPushTag));
    return r;
  };
  std::vector<Request> pushes = steps > 0 ? post_pushes() : std::vector<Request>{};
  // Only now may the workers push: a first push that arrived before its receive was posted
  // was buffered by the transport, so the server's heap at the round's start held 0, 1 or 2
  // extra copies of its slice, by timing (7.07 / 8.01 / 8.95 MB at 4 ranks).
  const char go = 1;
  std::vector<Request> ready;
  if (steps > 0)
    for (int w = 0; w < workers_; ++w) ready.push_back(comm_.isend(w, &go, 1, kReadyTag));
  for (Request& q : ready) q.wait();
  for (int64_t t = 0; t < steps; ++t) {
    const double t0 = now_seconds();
    for (Request& q : pushes) q.wait();
    const double t1 = now_seconds();
    if (inst_) inst_->wait("wait for pushes", t0, t1);
    // Sum in worker order, one optimizer step. Block by block (kSumBlock elements): a block
    // of the running sum stays in L1 while every push adds to it, so each push streams
    // through once and the sum is written once, instead of the whole slice's sum going
    // through L2 once per push. Each element still sums 0 + b0 + b1 + ... in worker order:
    // the same bits.
    if (det) {
      std::fill(acc.begin(), acc.end(), int64_t{0});
      for (size_t off = 0; off < len; off += kSumBlock) {
        const size_t end = std::min(len, off + kSumBlock);
        for (int w = 0; w < workers_; ++w) {
          const int64_t* b = pushed_i(w);
          for (size_t i = off; i < end; ++i) acc[i] += b[i];
        }
      }
      fixed_to_float(acc, grad);
    } else {
      // On the SIMD kernels (a plain loop stays scalar at -O2: 11% of an 8-rank step's CPU
      // in perf).
      std::fill(grad.begin(), grad.end(), 0.0f);
      for (size_t off = 0; off < len; off += kSumBlock) {
        const auto n = static_cast<int64_t>(std::min(kSumBlock, len - off));
        for (int w = 0; w < workers_; ++w) kernels().add(grad.data() + off, pushed_f(w) + off, grad.data() + off, n);
      }
    }
    pushes = t + 1 < steps ? post_pushes() : std::vector<Request>{};
    opt_->set_lr(*lr_);
    opt_->step(mine, grad);
    const double t2 = now_seconds();
    busy_ += t2 - t1;
    pushes_ += workers_;
    if (inst_) inst_->compute("server update", t1, t2);
    std::vector<Request> reqs;
    if (window_) copy_memory(window_->mine(), mine.data(), len * sizeof(float));
    for (int w = 0; w < workers_; ++w)
      reqs.push_back(window_ ? comm_.isend(w, &kWord, 1, kPullTag) : comm_.isend(w, mine.data(), len * sizeof(float), kPullTag));
    for (Request& q : reqs) q.wait();
    if (inst_) {
      const int64_t bytes = static_cast<int64_t>(len * workers_ * (det ? 12 : 8));
      inst_->comm(0, "serve step", t0, now_seconds(), bytes, "\"bytes\":" + std::to_string(bytes));
    }
  }
}

// Under mu_: every waiting worker whose staleness bound now holds gets its reply snapshot,
// taken at this instant (before any later update), so with K = 0 all replies of step c are
// the parameters right after the last update of step c — the synchronous server's.
void ParamServer::fill_ready_replies_locked() {
  const int64_t slowest = *std::min_element(clock_.begin(), clock_.end());
  std::span<const float> mine = model_.params().subspan(static_cast<size_t>(range_of(server_).offset),
                                                        static_cast<size_t>(range_of(server_).len));
  for (size_t u = 0; u < waiting_.size(); ++u) {
    if (waiting_[u] < 0 || ready_[u]) continue;
    if (o_.staleness >= 0 && slowest < waiting_[u] - o_.staleness) continue;
    copy_elements(replies_[u].data(), mine.data(), mine.size());
    version_sent_[u] = version_;
    ready_[u] = true;
  }
}

void ParamServer::serve_worker_async(int w, int64_t steps) {
  const GradRange rg = range_of(server_);
  const auto len = static_cast<size_t>(rg.len);
  const auto u = static_cast<size_t>(w);
  std::vector<float> grad(len);
  std::span<float> mine = model_.params().subspan(static_cast<size_t>(rg.offset), len);
  // Each push's receive is posted before the worker can send it (the first before the ready
  // message, the next before the reply that lets the worker go on), so no push is buffered
  // by the transport: the server's memory does not depend on timing (see server_epoch_sync).
  Request push;
  if (steps > 0) {
    push = comm_.irecv(w, grad.data(), len * sizeof(float), kPushTag);
    const char go = 1;
    comm_.send(w, &go, 1, kReadyTag);
  }
  for (int64_t c = 1; c <= steps; ++c) {
    push.wait();
    std::unique_lock<std::mutex> lock(mu_);
    if (failed_) return;
    const double stale = static_cast<double>(version_ - version_sent_[u]);
    stale_sum_ += stale;
    stale_max_ = std::max(stale_max_, stale);
    const double t0 = now_seconds();
    opt_->set_lr(*lr_);
    opt_->step(mine, grad);
    const double t1 = now_seconds();
    busy_ += t1 - t0;
    if (inst_) inst_->compute("server update (worker " + std::to_string(w) + ")", t0, t1);
    ++version_;
    ++pushes_;
    clock_[u] = c;
    waiting_[u] = c;
    ready_[u] = false;
    fill_ready_replies_locked();
    cv_->notify_all();
    const Deadline deadline = Deadline::after(comm_.timeout());
    while (!failed_ && !ready_[u])
      if (cv_->wait_until(lock, deadline.time_point()) == std::cv_status::timeout)
        DT_THROW(Timeout, "parameter server " << server_ << ": worker " << w << " waited " << comm_.timeout()
                                              << " s for the slowest worker (staleness bound " << o_.staleness << ")");
    if (failed_) return;
    waiting_[u] = -1;
    lock.unlock();
    if (c < steps) push = comm_.irecv(w, grad.data(), len * sizeof(float), kPushTag);  // grad is free again
    comm_.send(w, replies_[u].data(), len * sizeof(float), kPullTag);
  }
}

void ParamServer::server_epoch_async(int64_t steps) {
  cv_ = std::make_unique<std::condition_variable>();
  failed_ = false;
  std::fill(clock_.begin(), clock_.end(), 0);
  waiting_.assign(static_cast<size_t>(workers_), -1);
  ready_.assign(static_cast<size_t>(workers_), false);
  replies_.assign(static_cast<size_t>(workers_), std::vector<float>(static_cast<size_t>(range_of(server_).len)));
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (int w = 0; w < workers_; ++w)
    threads.emplace_back([&, w] {
      try {
        serve_worker_async(w, steps);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!first) first = std::current_exception();
        failed_ = true;
        cv_->notify_all();
      }
    });
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

LossAcc ParamServer::run_epoch(std::span<const int64_t> order, int64_t batch, const ProgressFn& progress) {
  DT_CHECK(batch >= 1, InvalidArgument, "--batch must be >= 1, got " << batch);
  const auto n = static_cast<int64_t>(order.size());
  const int64_t steps = (n + batch - 1) / batch;
  LossAcc local;
  if (is_server()) {
    if (o_.sync) server_epoch_sync(steps);
    else server_epoch_async(steps);
  } else {
    local = worker_epoch(order, batch, progress);
  }
  broadcast_model();
  return sum_stats(comm_, local);
}

Metrics ParamServer::epoch_metrics() {
  double sums[2] = {stale_sum_, static_cast<double>(pushes_)};
  double maxes[2] = {stale_max_, busy_};
  AllreduceOptions o;
  o.deterministic = true;
  allreduce(comm_, sums, 2, DType::kFloat64, ReduceOp::kSum, o);
  allreduce(comm_, maxes, 2, DType::kFloat64, ReduceOp::kMax, o);
  stale_sum_ = stale_max_ = busy_ = 0;
  pushes_ = 0;
  // Every push reaches every server: count it once.
  std::vector<std::pair<std::string, double>> m = {{"pushes", sums[1] / o_.servers}, {"server_busy_s", maxes[1]}};
  if (!o_.sync) {
    m.emplace_back("staleness_mean", sums[1] > 0 ? sums[0] / sums[1] : 0.0);
    m.emplace_back("staleness_max", maxes[0]);
  }
  return m;
}

std::vector<uint8_t> ParamServer::save_state() const { return opt_ ? opt_->save_state() : std::vector<uint8_t>{}; }

void ParamServer::load_state(std::span<const uint8_t> bytes) {
  if (opt_ && !bytes.empty()) opt_->load_state(bytes);
}

}  // namespace dtrain
