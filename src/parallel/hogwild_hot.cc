#include "parallel/hogwild_hot.h"

#include <algorithm>
#include <atomic>
#include <numeric>
#include <sstream>

#include "base/aligned.h"
#include "base/error.h"
#include "parallel/hogwild.h"

namespace dtrain {

std::vector<int64_t> feature_row_counts(const SparseRows& ds) {
  DT_CHECK(ds.is_sparse(), InvalidArgument, "feature counts need sparse rows; " << ds.source << " is dense");
  std::vector<int64_t> counts(static_cast<size_t>(ds.cols), 0);
  // Column indices are strictly increasing within a row, so each occurrence is a distinct row.
  for (int64_t n = 0; n < ds.row_ptr[ds.rows]; ++n) ++counts[static_cast<size_t>(ds.col_idx[n])];
  return counts;
}

std::vector<int32_t> most_frequent_features(const std::vector<int64_t>& counts, int64_t count) {
  DT_CHECK(count >= 0, InvalidArgument, "the number of hot features must be >= 0, got " << count);
  std::vector<int32_t> ids;
  for (size_t j = 0; j < counts.size(); ++j)
    if (counts[j] > 0) ids.push_back(static_cast<int32_t>(j));
  const auto take = static_cast<size_t>(std::min<int64_t>(count, static_cast<int64_t>(ids.size())));
  auto more_frequent = [&](int32_t a, int32_t b) {
    const int64_t ca = counts[static_cast<size_t>(a)], cb = counts[static_cast<size_t>(b)];
    return ca != cb ? ca > cb : a < b;
  };
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(take), ids.end(), more_frequent);
  ids.resize(take);
  return ids;
}

int64_t auto_hot_count(const std::vector<int64_t>& counts, int64_t rows, int64_t merge_every, int outputs) {
  DT_CHECK(merge_every >= 1 && outputs >= 1, InvalidArgument, "auto_hot_count needs merge_every >= 1 and outputs >= 1");
  const int64_t threshold = std::max<int64_t>(1, (kHotWritesPerWindow * rows + merge_every - 1) / merge_every);
  const auto n = static_cast<int64_t>(std::count_if(counts.begin(), counts.end(), [&](int64_t c) { return c >= threshold; }));
  return std::min(n, kMaxHotFloats / outputs);
}

// A thread's hot copy and its base, each on cache lines no other allocation shares: the
// buffers are over-allocated by 32 floats and used from the first 64-byte boundary. So are
// the per-example scratch (scores, dscores: own_lines) and the state itself (alignas): both
// threads write their scores every example, and where glibc put the two threads' 80-byte
// score buffers on one line (its per-thread arenas, from the second strategy a process
// builds on), news20 at 2 threads ran at 480k examples/s instead of 740k.
struct alignas(kCacheLine) HogwildHot::ThreadState {
  explicit ThreadState(size_t n) : local_buf(n + 32), base_buf(n + 32), local(aligned(local_buf)), base(aligned(base_buf)) {}
  static float* aligned(std::vector<float>& v) {
    auto p = reinterpret_cast<uintptr_t>(v.data());
    return reinterpret_cast<float*>((p + 63) & ~uintptr_t{63});
  }
  std::vector<float> local_buf, base_buf;
  float* local;  // H*K hot weights (slot-major: slot h at h*K), then the K biases
  float* base;
  AlignedVector<float> scores, dscores;
  int64_t merges = 0;
};

HogwildHot::HogwildHot(TrainableModel& model, const float* lr, const HogwildHotOptions& options)
    : ModelStrategy(model, nullptr),
      lr_(lr),
      options_(options),
      lin_(model.sparse()),
      k_(lin_ ? lin_->outputs() : 1),
      pool_(std::max(1, options.threads)) {
  DT_CHECK(model.sparse() != nullptr, InvalidArgument,
           "--strategy hogwild-hot trains the sparse linear models (logreg, svm, softmax), not " << model.describe());
  DT_CHECK(options.threads >= 1, InvalidArgument, "--threads must be >= 1, got " << options.threads);
  DT_CHECK(options.merge_every >= 1, InvalidArgument, "--merge-every must be >= 1, got " << options.merge_every);
  DT_CHECK(options.hot_features >= -1, InvalidArgument,
           "--hot-features must be >= 0 (or -1 for auto), got " << options.hot_features);
  const SparseLinear& m = *model.sparse();
  const data::Dataset& ds = model.train_set();
  const std::vector<int64_t> counts = feature_row_counts(ds);
  const int64_t h = options.hot_features >= 0 ? options.hot_features
                                              : auto_hot_count(counts, ds.rows, options.merge_every, m.outputs());
  hot_ = most_frequent_features(counts, h);
  // One thread runs serial SGD itself (alone_): the hot set is reported, nothing else is built.
  if (options.threads == 1) {
    alone_ = std::make_unique<Hogwild>(model, lr, 1, Hogwild::Mode::kLockFree);
    return;
  }
  // Slots in feature order, so that a merge walks the shared buffer forwards.
  slot_feature_ = hot_;
  std::sort(slot_feature_.begin(), slot_feature_.end());
  std::vector<int32_t> slot(static_cast<size_t>(m.features()), -1);
  for (size_t s = 0; s < slot_feature_.size(); ++s) slot[static_cast<size_t>(slot_feature_[s])] = static_cast<int32_t>(s);
  row_ptr_ = ds.row_ptr.data();
  idx_.resize(ds.col_idx.size());
  val_.resize(ds.col_idx.size());
  hot_nnz_.resize(static_cast<size_t>(ds.rows));
  for (int64_t r = 0; r < ds.rows; ++r) {
    const auto begin = static_cast<size_t>(ds.row_ptr[static_cast<size_t>(r)]);
    const auto end = static_cast<size_t>(ds.row_ptr[static_cast<size_t>(r) + 1]);
    size_t at = begin;
    for (int pass = 0; pass < 2; ++pass) {  // hot ones, then cold ones, each in the row's order
      for (size_t n = begin; n < end; ++n) {
        const int32_t j = ds.col_idx[n], h = slot[static_cast<size_t>(j)];
        if ((h >= 0) != (pass == 0)) continue;
        idx_[at] = h >= 0 ? h : j;
        val_[at] = ds.values[n];
        ++at;
      }
      if (pass == 0) hot_nnz_[static_cast<size_t>(r)] = static_cast<int32_t>(at - begin);
    }
  }
  const size_t hot_floats = (hot_.size() + 1) * static_cast<size_t>(m.outputs());
  for (int t = 0; t < options.threads; ++t) states_.push_back(std::make_unique<ThreadState>(hot_floats));
}

HogwildHot::~HogwildHot() = default;

std::string HogwildHot::describe() const {
  std::ostringstream os;
  os << ModelStrategy::describe() << ", " << hot_.size() << " hot features per thread, "
     << (options_.average ? "averaged" : "summed") << " every " << options_.merge_every << " examples";
  return os.str();
}

Metrics HogwildHot::epoch_metrics() { return {{"hot_features", static_cast<double>(hot_.size())}, {"merges", static_cast<double>(merges_)}}; }

// The kernels of SparseLinear (scores, update) over a row split in two: its hot nonzeros read
// and write the thread's copy with plain loads and stores, its cold ones the shared buffer
// through RelaxedAccess. Per coordinate the arithmetic is SparseLinear's and, where every
// feature is hot, so is its order (the merge test relies on it). (A lone thread does not come
// here: run_epoch hands it to serial SGD.) The split replaced a per-nonzero choice of buffer
// (a branch-free select by mask): news20 at 2 threads, see docs/ACCURACY.md.
void HogwildHot::scores(const ThreadState& st, const float* shared, int64_t e, float* __restrict out) const {
  // Pointers and counts in locals: after a relaxed atomic access the compiler reloads what it
  // reads through a member or a reference.
  const int k = k_;
  const float* local = st.local;
  const int64_t begin = row_ptr_[e], end = row_ptr_[e + 1];
  const int64_t hot_end = begin + hot_nnz_[static_cast<size_t>(e)];
  const int32_t* idx = idx_.data();
  const float* val = val_.data();
  const float* bias = local + hot_.size() * static_cast<size_t>(k);
  for (int c = 0; c < k; ++c) out[c] = bias[c];
  for (int64_t n = begin; n < hot_end; ++n) {
    const float x = val[n];
    const float* __restrict w = local + int64_t{idx[n]} * k;
    for (int c = 0; c < k; ++c) out[c] += x * w[c];
  }
  for (int64_t n = hot_end; n < end; ++n) {
    const float x = val[n];
    const float* w = shared + int64_t{idx[n]} * k;
    for (int c = 0; c < k; ++c) out[c] += x * RelaxedAccess::load(w + c);
  }
}

// Every cold row example e will read and then write (hogwild.h's prefetch_row_for_write).
// See run_stream. The hot rows are the thread's own and stay in its cache.
void HogwildHot::prefetch_cold(const float* shared, int64_t e) const {
  const int64_t end = row_ptr_[e + 1];
  for (int64_t n = row_ptr_[e] + hot_nnz_[static_cast<size_t>(e)]; n < end; ++n)
    prefetch_row_for_write(shared + int64_t{idx_[static_cast<size_t>(n)]} * k_, k_);
}

namespace {
template <class Access>
void add_row(float* __restrict w, int k, float sx, const float* __restrict dscore, float scale, float l2) {
  if (l2 == 0.0f) {
    for (int c = 0; c < k; ++c) Access::add(w + c, sx * dscore[c]);
  } else {
    for (int c = 0; c < k; ++c) Access::add(w + c, sx * dscore[c] + scale * l2 * Access::load(w + c));
  }
}

// The merge rule (see the header) on one row of k coordinates; weight is 1 (sum, or one
// thread) or 1/T (average). With weight 1 an unchanged shared value takes the local value as
// is. Restrict-qualified and branch-free so that the compiler vectorises it.
void merge_row(float* __restrict shared, float* __restrict local, float* __restrict base, int k, float weight) {
  if (weight == 1.0f) {
    for (int c = 0; c < k; ++c) {
      const float s = shared[c], l = local[c], b = base[c];
      const float v = s == b ? l : s + (l - b);
      shared[c] = v;
      local[c] = v;
      base[c] = v;
    }
  } else {
    for (int c = 0; c < k; ++c) {
      const float v = shared[c] + weight * (local[c] - base[c]);
      shared[c] = v;
      local[c] = v;
      base[c] = v;
    }
  }
}
}  // namespace

void HogwildHot::update(ThreadState& st, float* shared, int64_t e, const float* dscore, float scale) const {
  const int k = k_;
  const float l2 = lin_->l2();
  float* local = st.local;
  const int64_t begin = row_ptr_[e], end = row_ptr_[e + 1];
  const int64_t hot_end = begin + hot_nnz_[static_cast<size_t>(e)];
  const int32_t* idx = idx_.data();
  const float* val = val_.data();
  for (int64_t n = begin; n < hot_end; ++n) add_row<PlainAccess>(local + int64_t{idx[n]} * k, k, scale * val[n], dscore, scale, l2);
  for (int64_t n = hot_end; n < end; ++n)
    add_row<RelaxedAccess>(shared + int64_t{idx[n]} * k, k, scale * val[n], dscore, scale, l2);
  float* bias = local + hot_.size() * static_cast<size_t>(k);
  for (int c = 0; c < k; ++c) bias[c] += scale * dscore[c];
}

// Both walk the hot coordinates slot by slot; shared rows are at feature * K, biases at the
// end of the buffer. Only these functions touch the shared hot coordinates, always under the
// mutex (pull runs on the driver thread before the epoch's threads start; the lock is for
// symmetry and costs nothing there).
void HogwildHot::pull(ThreadState& st) {
  const SparseLinear& m = *model_.sparse();
  const int k = m.outputs();
  const float* shared = model_.params().data();
  std::lock_guard<std::mutex> lock(merge_mu_);
  for (size_t h = 0; h <= hot_.size(); ++h) {
    const float* src = shared + (h < hot_.size() ? int64_t{slot_feature_[h]} * k : m.bias_offset());
    std::copy(src, src + k, st.local + h * static_cast<size_t>(k));
    std::copy(src, src + k, st.base + h * static_cast<size_t>(k));
  }
}

bool HogwildHot::merge(ThreadState& st, bool wait) {
  const SparseLinear& m = *model_.sparse();
  const int k = m.outputs();
  float* shared = model_.params().data();
  // With one thread there is nothing to average: its value is the value (weight 1).
  const float weight = options_.average ? 1.0f / static_cast<float>(options_.threads) : 1.0f;
  std::unique_lock<std::mutex> lock(merge_mu_, std::defer_lock);
  if (wait)
    lock.lock();
  else if (!lock.try_lock())
    return false;
  for (size_t h = 0; h <= hot_.size(); ++h) {
    float* s = shared + (h < hot_.size() ? int64_t{slot_feature_[h]} * k : m.bias_offset());
    merge_row(s, st.local + h * static_cast<size_t>(k), st.base + h * static_cast<size_t>(k), k, weight);
  }
  ++st.merges;
  return true;
}

// Where a thread's examples come from. balance: every thread claims the next chunk of the
// whole order from the one cursor; otherwise each thread has a Source of its own over its
// fixed range and is the only one to claim from it. A chunk is a run of whole minibatches
// (the epoch's last one may be short).
struct HogwildHot::Source {
  std::span<const int64_t> order;
  int64_t chunk = 0;
  std::atomic<int64_t> next{0};
  std::span<const int64_t> claim() {
    const int64_t n = static_cast<int64_t>(order.size());
    const int64_t at = next.load(std::memory_order_relaxed) < n ? next.fetch_add(chunk, std::memory_order_relaxed) : n;
    return at < n ? order.subspan(static_cast<size_t>(at), static_cast<size_t>(std::min(chunk, n - at)))
                  : std::span<const int64_t>{};
  }
};

// One thread's stream: HOGWILD!'s minibatch loop (parallel/hogwild.cc) on the split model,
// over the chunks it claims, with a merge after every merge_every examples and at the end.
LossAcc HogwildHot::run_stream(ThreadState& st, Source& source, int64_t batch, float lr, const ProgressFn* progress,
                               int64_t scale) {
  const SparseLinear& m = *model_.sparse();
  const data::Dataset& ds = model_.train_set();
  float* shared = model_.params().data();
  const int k = m.outputs();
  st.scores = own_lines<float>(static_cast<size_t>(k));
  st.dscores = own_lines<float>(static_cast<size_t>(k * batch));
  LossAcc acc;
  int64_t since_merge = 0, batches = 0;
  // With other threads writing, the next example's cold rows are asked for (for writing)
  // while this one is computed: a row another core wrote last is a miss that costs a
  // cross-core transfer, 2-3x more when the two vCPUs are far apart (docs/history/
  // sittings.md, "the VM has two modes"). Measured on news20 at 2 threads: +50-60% examples/s
  // in the far mode, no change in the near one. (A lone thread never comes here.)
  for (std::span<const int64_t> chunk = source.claim(); !chunk.empty(); chunk = source.claim()) {
    const auto n = static_cast<int64_t>(chunk.size());
    for (int64_t first = 0; first < n; first += batch) {
      const int64_t len = std::min(batch, n - first);
      const float step = -lr / static_cast<float>(len);
      for (int64_t i = 0; i < len; ++i) {
        const int64_t e = chunk[static_cast<size_t>(first + i)];
        const int label = ds.labels[static_cast<size_t>(e)];
        if (first + i + 1 < n) prefetch_cold(shared, chunk[static_cast<size_t>(first + i + 1)]);
        scores(st, shared, e, st.scores.data());
        acc.correct += m.predict_from_scores(st.scores.data()) == label;
        acc.loss += m.loss_and_dscore(st.scores.data(), label, st.dscores.data() + i * k);
      }
      for (int64_t i = 0; i < len; ++i)
        update(st, shared, chunk[static_cast<size_t>(first + i)], st.dscores.data() + i * k, step);
      acc.examples += len;
      since_merge += len;
      // The threads run at the same rate from the same start, so they reach their merges
      // together: one that finds another merging goes on training and tries again after its
      // next minibatch instead of waiting out the other's merge (its window grows by that).
      if (since_merge >= options_.merge_every && merge(st, /*wait=*/false)) since_merge = 0;
      if (progress && ++batches % 64 == 0) (*progress)(acc.examples * scale, acc.loss / static_cast<double>(acc.examples));
    }
  }
  merge(st, /*wait=*/true);
  return acc;
}

LossAcc HogwildHot::run_epoch(std::span<const int64_t> order, int64_t batch, const ProgressFn& progress) {
  DT_CHECK(batch >= 1, InvalidArgument, "--batch must be >= 1, got " << batch);
  if (alone_) {
    merges_ = 0;
    return alone_->run_epoch(order, batch, progress);
  }
  const float lr = *lr_;
  const int threads = options_.threads;
  const auto n = static_cast<int64_t>(order.size());
  std::vector<LossAcc> parts(static_cast<size_t>(threads));
  // Every thread starts the epoch from the same model (before any of them merges).
  for (auto& st : states_) {
    pull(*st);
    st->merges = 0;
  }
  // balance: one source over the whole order; else one per thread over its contiguous 1/T
  // (as in Hogwild::run_epoch). Stream 0 reports progress.
  std::vector<Source> sources(options_.balance ? 1 : static_cast<size_t>(threads));
  for (size_t t = 0; t < sources.size(); ++t) {
    const int64_t lo = n * static_cast<int64_t>(t) / static_cast<int64_t>(sources.size());
    const int64_t hi = n * static_cast<int64_t>(t + 1) / static_cast<int64_t>(sources.size());
    sources[t].order = order.subspan(static_cast<size_t>(lo), static_cast<size_t>(hi - lo));
    sources[t].chunk = options_.balance ? (kChunkExamples + batch - 1) / batch * batch : std::max<int64_t>(hi - lo, 1);
  }
  pool_.parallel_for(0, threads, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      Source& source = sources[options_.balance ? 0 : static_cast<size_t>(t)];
      const ProgressFn* report = (t == 0 && progress) ? &progress : nullptr;
      parts[static_cast<size_t>(t)] = run_stream(*states_[static_cast<size_t>(t)], source, batch, lr, report, threads);
    }
  });
  LossAcc total;
  merges_ = 0;
  for (size_t t = 0; t < parts.size(); ++t) {
    total.loss += parts[t].loss;
    total.correct += parts[t].correct;
    total.examples += parts[t].examples;
    merges_ += states_[t]->merges;
  }
  if (total.examples) total.loss /= static_cast<double>(total.examples);
  return total;
}

}  // namespace dtrain
