// autograd/ops_basic.cc — arithmetic, shape ops and reductions with their backward rules.
//
// Each op computes its value with tensor/ops.h, then records a backward function that reads
// the output gradient gy = d loss / d out and delivers d loss / d input to every input that
// needs it (detail::write_grad / Graph::accumulate_grad).
#include <algorithm>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/kernels.h"
#include "tensor/ops.h"

namespace dtrain {

using detail::graph_of;
using detail::write_grad;

namespace {
// sink (+)= alpha * src, element-wise over contiguous tensors of equal size.
void put_scaled(Tensor& sink, bool acc, float alpha, const Tensor& src_in) {
  Tensor src = src_in.contiguous();
  const Kernels& k = kernels();
  if (acc) k.axpy(alpha, src.data(), sink.data(), sink.numel());
  else k.scale(alpha, src.data(), sink.data(), sink.numel());
}
}  // namespace

// d(a+b) = (gy, gy)
Var add(const Var& a, const Var& b) {
  Graph& g = graph_of({&a, &b}, "add");
  Tensor out = dtrain::add(a.value(), b.value(), g.pool());
  return g.make(out, {a.id(), b.id()}, [](Graph& g, int self) {
    const Tensor& gy = g.grad(self);
    for (int in : g.inputs(self))
      if (g.requires_grad(in)) g.accumulate_grad(in, gy);
  });
}

// d(a-b) = (gy, -gy)
Var sub(const Var& a, const Var& b) {
  Graph& g = graph_of({&a, &b}, "sub");
  Tensor out = dtrain::sub(a.value(), b.value(), g.pool());
  return g.make(out, {a.id(), b.id()}, [](Graph& g, int self) {
    const Tensor& gy = g.grad(self);
    write_grad(g, g.inputs(self)[0], [&](Tensor& s, bool acc) { put_scaled(s, acc, 1.0f, gy); });
    write_grad(g, g.inputs(self)[1], [&](Tensor& s, bool acc) { put_scaled(s, acc, -1.0f, gy); });
  });
}

// d(a*b) = (gy*b, gy*a)
Var mul(const Var& a, const Var& b) {
  Graph& g = graph_of({&a, &b}, "mul");
  Tensor out = dtrain::mul(a.value(), b.value(), g.pool());
  return g.make(out, {a.id(), b.id()}, [](Graph& g, int self) {
    const Tensor& gy = g.grad(self);
    int ia = g.inputs(self)[0], ib = g.inputs(self)[1];
    if (g.requires_grad(ia)) g.accumulate_grad(ia, dtrain::mul(gy, g.value(ib), g.pool()));
    if (g.requires_grad(ib)) g.accumulate_grad(ib, dtrain::mul(gy, g.value(ia), g.pool()));
  });
}

Var scale(const Var& x, float alpha) {
  Graph& g = graph_of({&x}, "scale");
  Tensor out = dtrain::scale(x.value(), alpha, g.pool());
  return g.make(out, {x.id()}, [alpha](Graph& g, int self) {
    const Tensor& gy = g.grad(self);
    write_grad(g, g.inputs(self)[0], [&](Tensor& s, bool acc) { put_scaled(s, acc, alpha, gy); });
  });
}

// out = x + bias (broadcast over rows); d bias = sum of gy over rows.
Var bias_add(const Var& x, const Var& bias) {
  Graph& g = graph_of({&x, &bias}, "bias_add");
  Tensor out = dtrain::bias_add(x.value(), bias.value(), g.pool());
  return g.make(out, {x.id(), bias.id()}, [](Graph& g, int self) {
    const Tensor& gy = g.grad(self);
    int ix = g.inputs(self)[0], ib = g.inputs(self)[1];
    if (g.requires_grad(ix)) g.accumulate_grad(ix, gy);
    write_grad(g, ib, [&](Tensor& s, bool acc) { sum_rows_into(gy, s.data(), acc, g.pool()); });
  });
}

// --- shape ops ---

Var reshape(const Var& x, const Shape& shape) {
  Graph& g = graph_of({&x}, "reshape");
  Tensor out = x.value().contiguous().reshape(shape);
  return g.make(out, {x.id()}, [](Graph& g, int self) {
    int ix = g.inputs(self)[0];
    g.accumulate_grad(ix, g.grad(self).reshape(g.value(ix).shape()));
  });
}

Var transpose(const Var& x, int dim0, int dim1) {
  Graph& g = graph_of({&x}, "transpose");
  Tensor out = x.value().transpose(dim0, dim1).contiguous();
  return g.make(out, {x.id()}, [dim0, dim1](Graph& g, int self) {
    g.accumulate_grad(g.inputs(self)[0], g.grad(self).transpose(dim0, dim1));
  });
}

namespace {
// dst (a strided view) += src, element by element through a dense copy.
void add_into_view(Tensor dst, const Tensor& src) {
  Tensor sum = dtrain::add(dst, src);
  dst.copy_from(sum);
}
}  // namespace

// Backward of a slice: zeros outside [begin, end), gy inside.
Var slice(const Var& x, int dim, int64_t begin, int64_t end) {
  Graph& g = graph_of({&x}, "slice");
  Tensor out = x.value().slice(dim, begin, end).contiguous();
  return g.make(out, {x.id()}, [dim, begin, end](Graph& g, int self) {
    const Tensor& gy = g.grad(self);
    write_grad(g, g.inputs(self)[0], [&](Tensor& s, bool acc) {
      if (!acc) s.fill(0.0f);
      add_into_view(s.slice(dim, begin, end), gy);
    });
  });
}

// Each input's gradient is the matching slice of gy.
Var concat(const std::vector<Var>& xs, int dim) {
  DT_CHECK(!xs.empty(), InvalidArgument, "concat of no tensors");
  Graph& g = graph_of({&xs[0]}, "concat");
  const Shape& first = xs[0].shape();
  int nd = static_cast<int>(first.size());
  int d = dim < 0 ? dim + nd : dim;
  DT_CHECK(d >= 0 && d < nd, InvalidArgument, "concat dimension " << dim << " for shape " << shape_str(first));
  Shape shape = first;
  shape[d] = 0;
  std::vector<int> ids;
  std::vector<int64_t> offsets;
  for (const Var& x : xs) {
    DT_CHECK(x.graph() == &g, InvalidArgument, "concat: inputs belong to different graphs");
    Shape s = x.shape();
    DT_CHECK(static_cast<int>(s.size()) == nd, InvalidArgument,
             "concat: " << shape_str(first) << " and " << shape_str(s) << " differ in rank");
    for (int i = 0; i < nd; ++i)
      DT_CHECK(i == d || s[i] == first[i], InvalidArgument,
               "concat along " << d << ": " << shape_str(first) << " and " << shape_str(s) << " differ in dimension " << i);
    offsets.push_back(shape[d]);
    shape[d] += s[d];
    ids.push_back(x.id());
  }
  Tensor out = Tensor::empty(shape);
  for (size_t i = 0; i < xs.size(); ++i)
    out.slice(d, offsets[i], offsets[i] + xs[i].dim(d)).copy_from(xs[i].value());
  return g.make(out, ids, [d, offsets](Graph& g, int self) {
    const Tensor& gy = g.grad(self);
    const std::vector<int>& in = g.inputs(self);
    for (size_t i = 0; i < in.size(); ++i) {
      if (!g.requires_grad(in[i])) continue;
      g.accumulate_grad(in[i], gy.slice(d, offsets[i], offsets[i] + g.value(in[i]).dim(d)));
    }
  });
}

// --- reductions ---

Var sum(const Var& x) {
  Graph& g = graph_of({&x}, "sum");
  Tensor out = Tensor::scalar(dtrain::sum(x.value(), g.pool()));
  return g.make(out, {x.id()}, [](Graph& g, int self) {
    float gy = g.grad(self).item();
    write_grad(g, g.inputs(self)[0], [&](Tensor& s, bool acc) {
      if (acc) {
        for (float& v : s.span()) v += gy;
      } else {
        s.fill(gy);
      }
    });
  });
}

Var mean(const Var& x) {
  DT_CHECK(x.value().numel() > 0, InvalidArgument, "mean of an empty tensor");
  return scale(sum(x), 1.0f / static_cast<float>(x.value().numel()));
}

}  // namespace dtrain
