// tensor/tensor.h — a float32 n-d array: shape + strides over shared storage.
//
// Contract
// - A Tensor is a view: (storage, offset, shape, strides). Copying a Tensor copies the view,
//   never the data; clone() copies the data. Views made by reshape/transpose/slice share the
//   storage, so writes through one view are seen by the others.
// - Storage is either owned (allocated 64-byte aligned by zeros/empty/full/from) or borrowed
//   (Tensor::wrap over memory the caller keeps alive, e.g. a slice of a model's flat
//   parameter buffer). A default-constructed Tensor is "undefined" (defined() == false).
// - Element type is float32. Half types (bf16/fp16) are for communication only; see
//   tensor/convert.h for bulk conversions.
// - Strides are in elements. is_contiguous() means row-major with no gaps; data() of a
//   contiguous tensor is numel() consecutive floats. Ops that need contiguity say so and
//   throw InvalidArgument (naming the shape) otherwise; contiguous() makes a dense copy
//   only when needed.
// - Shape errors name both shapes, e.g. "reshape: [2, 3] has 6 elements, [4, 2] has 8".
// Thread-safety: a Tensor is a value type; concurrent reads are fine, concurrent writes to
// the same elements are the caller's business (HOGWILD! does this on purpose).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace dtrain {

using Shape = std::vector<int64_t>;

// "[2, 3, 4]"
std::string shape_str(const Shape& shape);
// Product of the dimensions (1 for a scalar shape []). Throws on negative dimensions.
int64_t shape_numel(const Shape& shape);
// Row-major strides for a shape.
Shape contiguous_strides(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;

  // Owning constructors. empty() leaves the memory uninitialized.
  static Tensor empty(const Shape& shape);
  static Tensor zeros(const Shape& shape);
  static Tensor full(const Shape& shape, float value);
  // Copies `values` (its size must equal the shape's element count).
  static Tensor from(const Shape& shape, std::span<const float> values);
  static Tensor from(const Shape& shape, std::initializer_list<float> values);
  static Tensor scalar(float value);
  // Borrowing view over caller-owned contiguous memory; the caller keeps it alive.
  static Tensor wrap(float* data, const Shape& shape);

  bool defined() const { return static_cast<bool>(storage_); }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  // Dimension i; negative i counts from the end.
  int64_t dim(int i) const;
  int64_t numel() const { return numel_; }
  bool is_contiguous() const;

  float* data() { return storage_.get() + offset_; }
  const float* data() const { return storage_.get() + offset_; }
  // The contiguous elements as a span; throws if not contiguous.
  std::span<float> span();
  std::span<const float> span() const;

  // Element access by full index (bounds-checked); slow, for tests and small code.
  float at(std::initializer_list<int64_t> index) const;
  float& at(std::initializer_list<int64_t> index);
  // The only element of a one-element tensor.
  float item() const;
  std::vector<float> to_vector() const;

  // Views. reshape needs a contiguous tensor (one -1 dimension is inferred).
  Tensor reshape(const Shape& shape) const;
  Tensor transpose(int dim0, int dim1) const;
  Tensor slice(int dim, int64_t begin, int64_t end) const;
  // Row i of the first dimension (a view with one dimension less).
  Tensor operator[](int64_t i) const;

  // Copies.
  Tensor contiguous() const;
  Tensor clone() const;
  // Copies src (same shape) into this tensor's elements.
  void copy_from(const Tensor& src);
  void fill(float value);

  // True when both views use the same storage block.
  bool shares_storage(const Tensor& other) const { return storage_ == other.storage_; }

 private:
  Tensor(std::shared_ptr<float> storage, int64_t offset, Shape shape, Shape strides);
  int64_t offset_of(std::initializer_list<int64_t> index) const;

  std::shared_ptr<float> storage_;
  int64_t offset_ = 0;
  Shape shape_;
  Shape strides_;
  int64_t numel_ = 0;
};

// Max |a - b| over elements; throws when shapes differ. For tests and checks.
float max_abs_diff(const Tensor& a, const Tensor& b);

}  // namespace dtrain
