#include "plan/calibrate_tp.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "autograd/graph.h"
#include "base/error.h"
#include "coll/collectives.h"
#include "nn/transformer.h"
#include "parallel/tensor_parallel.h"
#include "plan/calibrate_units.h"
#include "tensor/blas.h"
#include "tensor/denormals.h"

namespace dtrain::plan {
namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

double max_over_ranks(Communicator& comm, double v) {
  allreduce(comm, &v, 1, DType::kFloat64, ReduceOp::kMax);
  return v;
}

}  // namespace

TpBlockPoint time_tp_block(Communicator& comm, const std::string& spec, int64_t items, double seconds, Communicator* job) {
  Communicator& all = job ? *job : comm;
  GptConfig c = GptConfig::parse(spec, 65);
  const int p = comm.size();
  DT_CHECK(c.heads % p == 0, InvalidArgument,
           "tensor-parallel block of " << spec << " on " << p << " ranks: heads must be a multiple of the ranks");
  DT_CHECK(items >= 1, InvalidArgument, "tensor-parallel block: items must be >= 1, got " << items);
  keep_heap_warm();
  set_blas_threads(1);
  FlushDenormals ftz;  // as the executors run
  c.layers = std::max<int64_t>(c.layers, kTpStack);
  GptStage stage(c, 1, 1 + kTpStack, p);
  stage.allocate(1);
  stage.init_gpt(1);
  TpGroup group(&comm);
  TpHooks hooks(group);
  const int64_t tok = items * c.context;
  // Inputs that vary along a row (a constant row would make LayerNorm's variance zero); every
  // rank of a tensor-parallel group holds the same input, as in training.
  Tensor x = Tensor::empty({tok, c.width}), seed = Tensor::empty({tok, c.width});
  for (int64_t i = 0; i < x.numel(); ++i) {
    x.data()[i] = 0.5f * std::sin(0.37f * static_cast<float>(i));
    seed.data()[i] = 1e-3f * std::cos(0.11f * static_cast<float>(i));
  }
  std::vector<double> fs, bs;
  auto pass = [&] {
    Graph g;
    const double t0 = now();
    Var y = stage.forward_stage(g, g.leaf(x), {}, {}, items, c.context, &hooks);
    const double t1 = now();
    g.backward(y, seed);
    const double t2 = now();
    fs.push_back(t1 - t0);
    bs.push_back(t2 - t1);
  };
  pass();  // warm-up: first touch of the buffers
  // Every rank must run the same number of passes (each issues the same all-reduces).
  const double first = max_over_ranks(all, fs.back() + bs.back());
  const int passes = static_cast<int>(std::clamp(seconds / std::max(first, 1e-6), 5.0, 60.0));
  fs.clear(), bs.clear();
  for (int i = 0; i < passes; ++i) pass();
  TpBlockPoint r;
  r.items = items;
  r.fwd_s = max_over_ranks(all, median(fs)) / kTpStack;
  r.bwd_s = max_over_ranks(all, median(bs)) / kTpStack;
  return r;
}

}  // namespace dtrain::plan
