// tensor/tensor.cc — Tensor views: construction, indexing, reshape/transpose/slice, copies.
#include "tensor/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>

#include "base/error.h"

namespace dtrain {

std::string shape_str(const Shape& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    DT_CHECK(d >= 0, InvalidArgument, "shape " << shape_str(shape) << " has a negative dimension");
    n *= d;
  }
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

namespace {
// 64-byte aligned owned storage (cache line and AVX-512 width). At least one element so a
// zero-size tensor is still "defined".
std::shared_ptr<float> allocate(int64_t n) {
  size_t bytes = static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(float);
  bytes = (bytes + 63) / 64 * 64;
  // Through the aligned operator new, so base/heap_stats.h counts tensors with everything else.
  void* p = ::operator new(bytes, std::align_val_t{64}, std::nothrow);
  DT_CHECK(p != nullptr, Error, "out of memory allocating " << bytes << " bytes for a tensor");
  return std::shared_ptr<float>(static_cast<float*>(p), [](float* q) { ::operator delete(q, std::align_val_t{64}); });
}
}  // namespace

Tensor::Tensor(std::shared_ptr<float> storage, int64_t offset, Shape shape, Shape strides)
    : storage_(std::move(storage)), offset_(offset), shape_(std::move(shape)),
      strides_(std::move(strides)), numel_(shape_numel(shape_)) {}

Tensor Tensor::empty(const Shape& shape) {
  int64_t n = shape_numel(shape);
  return Tensor(allocate(n), 0, shape, contiguous_strides(shape));
}

Tensor Tensor::zeros(const Shape& shape) { return full(shape, 0.0f); }

Tensor Tensor::full(const Shape& shape, float value) {
  Tensor t = empty(shape);
  std::fill_n(t.data(), t.numel(), value);
  return t;
}

Tensor Tensor::from(const Shape& shape, std::span<const float> values) {
  Tensor t = empty(shape);
  DT_CHECK(static_cast<int64_t>(values.size()) == t.numel(), InvalidArgument,
           "Tensor::from: shape " << shape_str(shape) << " has " << t.numel() << " elements but "
                                  << values.size() << " values were given");
  std::copy(values.begin(), values.end(), t.data());
  return t;
}

Tensor Tensor::from(const Shape& shape, std::initializer_list<float> values) {
  return from(shape, std::span<const float>(values.begin(), values.size()));
}

Tensor Tensor::scalar(float value) { return full({}, value); }

Tensor Tensor::wrap(float* data, const Shape& shape) {
  DT_CHECK(data != nullptr || shape_numel(shape) == 0, InvalidArgument, "Tensor::wrap of a null pointer");
  if (data == nullptr) return empty(shape);  // zero elements: a tiny owned block keeps it defined
  // Aliasing constructor: no ownership, only the pointer.
  return Tensor(std::shared_ptr<float>(std::shared_ptr<float>(), data), 0, shape, contiguous_strides(shape));
}

int64_t Tensor::dim(int i) const {
  int n = ndim();
  int j = i < 0 ? i + n : i;
  DT_CHECK(j >= 0 && j < n, InvalidArgument, "dimension " << i << " out of range for shape " << shape_str(shape_));
  return shape_[j];
}

bool Tensor::is_contiguous() const {
  if (numel_ == 0) return true;  // nothing to lay out
  int64_t s = 1;
  for (int i = ndim() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != s) return false;
    s *= shape_[i];
  }
  return true;
}

std::span<float> Tensor::span() {
  DT_CHECK(is_contiguous(), InvalidArgument, "span() of a non-contiguous tensor " << shape_str(shape_));
  return {data(), static_cast<size_t>(numel_)};
}
std::span<const float> Tensor::span() const {
  DT_CHECK(is_contiguous(), InvalidArgument, "span() of a non-contiguous tensor " << shape_str(shape_));
  return {data(), static_cast<size_t>(numel_)};
}

int64_t Tensor::offset_of(std::initializer_list<int64_t> index) const {
  DT_CHECK(static_cast<int>(index.size()) == ndim(), InvalidArgument,
           "index with " << index.size() << " coordinates into shape " << shape_str(shape_));
  int64_t off = 0;
  int d = 0;
  for (int64_t i : index) {
    DT_CHECK(i >= 0 && i < shape_[d], InvalidArgument,
             "index " << i << " out of range in dimension " << d << " of " << shape_str(shape_));
    off += i * strides_[d++];
  }
  return off;
}

float Tensor::at(std::initializer_list<int64_t> index) const { return data()[offset_of(index)]; }
float& Tensor::at(std::initializer_list<int64_t> index) { return data()[offset_of(index)]; }

float Tensor::item() const {
  DT_CHECK(numel_ == 1, InvalidArgument, "item() of a tensor with shape " << shape_str(shape_));
  return *data();
}

std::vector<float> Tensor::to_vector() const {
  Tensor c = contiguous();
  return std::vector<float>(c.data(), c.data() + c.numel());
}

Tensor Tensor::reshape(const Shape& shape) const {
  Shape s = shape;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      DT_CHECK(infer < 0, InvalidArgument, "reshape to " << shape_str(shape) << ": more than one -1");
      infer = static_cast<int>(i);
    } else {
      known *= s[i];
    }
  }
  if (infer >= 0) {
    DT_CHECK(known > 0 && numel_ % known == 0, InvalidArgument,
             "reshape: cannot infer -1 in " << shape_str(shape) << " for " << shape_str(shape_));
    s[infer] = numel_ / known;
  }
  DT_CHECK(shape_numel(s) == numel_, InvalidArgument,
           "reshape: " << shape_str(shape_) << " has " << numel_ << " elements, " << shape_str(s)
                       << " has " << shape_numel(s));
  DT_CHECK(is_contiguous(), InvalidArgument,
           "reshape of a non-contiguous view " << shape_str(shape_) << "; call contiguous() first");
  return Tensor(storage_, offset_, s, contiguous_strides(s));
}

Tensor Tensor::transpose(int dim0, int dim1) const {
  int n = ndim();
  int a = dim0 < 0 ? dim0 + n : dim0, b = dim1 < 0 ? dim1 + n : dim1;
  DT_CHECK(a >= 0 && a < n && b >= 0 && b < n, InvalidArgument,
           "transpose(" << dim0 << ", " << dim1 << ") of shape " << shape_str(shape_));
  Shape sh = shape_, st = strides_;
  std::swap(sh[a], sh[b]);
  std::swap(st[a], st[b]);
  return Tensor(storage_, offset_, sh, st);
}

Tensor Tensor::slice(int dim, int64_t begin, int64_t end) const {
  int n = ndim();
  int d = dim < 0 ? dim + n : dim;
  DT_CHECK(d >= 0 && d < n, InvalidArgument, "slice dimension " << dim << " of shape " << shape_str(shape_));
  DT_CHECK(0 <= begin && begin <= end && end <= shape_[d], InvalidArgument,
           "slice [" << begin << ", " << end << ") out of range for dimension " << d << " of "
                     << shape_str(shape_));
  Shape sh = shape_;
  sh[d] = end - begin;
  return Tensor(storage_, offset_ + begin * strides_[d], sh, strides_);
}

Tensor Tensor::operator[](int64_t i) const {
  DT_CHECK(ndim() >= 1, InvalidArgument, "indexing a scalar tensor");
  Tensor s = slice(0, i, i + 1);
  Shape sh(s.shape_.begin() + 1, s.shape_.end());
  Shape st(s.strides_.begin() + 1, s.strides_.end());
  return Tensor(storage_, s.offset_, sh, st);
}

// Copies element by element in row-major order of `src`'s shape; the innermost dimension is
// a tight loop so strided copies stay reasonably fast.
static void strided_copy(const float* src, const Shape& shape, const Shape& sstr, float* dst,
                         const Shape& dstr, int d) {
  if (shape.empty()) {
    *dst = *src;
    return;
  }
  int64_t n = shape[d];
  if (d == static_cast<int>(shape.size()) - 1) {
    int64_t ss = sstr[d], ds = dstr[d];
    for (int64_t i = 0; i < n; ++i) dst[i * ds] = src[i * ss];
    return;
  }
  for (int64_t i = 0; i < n; ++i) strided_copy(src + i * sstr[d], shape, sstr, dst + i * dstr[d], dstr, d + 1);
}

void Tensor::copy_from(const Tensor& src) {
  DT_CHECK(src.shape_ == shape_, InvalidArgument,
           "copy_from: destination " << shape_str(shape_) << " vs source " << shape_str(src.shape_));
  if (numel_ == 0) return;
  if (is_contiguous() && src.is_contiguous()) {
    std::memmove(data(), src.data(), numel_ * sizeof(float));
    return;
  }
  strided_copy(src.data(), shape_, src.strides_, data(), strides_, 0);
}

void Tensor::fill(float value) {
  if (is_contiguous()) {
    std::fill_n(data(), numel_, value);
    return;
  }
  Tensor c = full(shape_, value);
  copy_from(c);
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_);
  t.copy_from(*this);
  return t;
}

float max_abs_diff(const Tensor& a, const Tensor& b) {
  DT_CHECK(a.shape() == b.shape(), InvalidArgument,
           "max_abs_diff: " << shape_str(a.shape()) << " vs " << shape_str(b.shape()));
  std::vector<float> x = a.to_vector(), y = b.to_vector();
  float m = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    float d = std::fabs(x[i] - y[i]);
    if (std::isnan(d)) return d;
    m = std::max(m, d);
  }
  return m;
}

}  // namespace dtrain
