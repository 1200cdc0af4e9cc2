// data/dataset.h — in-memory labelled datasets: dense rows or sparse CSR rows.
//
// Contract
// - A Dataset holds `rows` examples with `cols` features and one integer label per example in
//   [0, num_classes). Exactly one storage is used:
//     dense:  `dense` has rows * cols floats, row-major;
//     sparse: CSR — row i's nonzeros are col_idx/values[row_ptr[i], row_ptr[i+1]), column
//             indices 0-based and strictly increasing within a row; row_ptr has rows + 1
//             entries.
// - `label_values` maps a class id back to the label as written in the file (e.g. -1/+1 for a
//   binary LIBSVM file); it is what a test file's labels are matched against.
// - `source` names the file(s) it came from, for messages.
// - validate() checks every invariant above and throws Corrupt naming the first violation.
// Thread-safety: immutable after loading; any number of threads may read it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tensor/sparse.h"

namespace dtrain::data {

// A view of one sparse row (tensor/sparse.h, where the sparse models read it).
using SparseRow = dtrain::SparseRow;

struct Dataset {
  std::string source;
  int64_t rows = 0;
  int64_t cols = 0;
  int num_classes = 0;
  std::vector<int32_t> labels;
  std::vector<double> label_values;

  bool sparse = false;
  std::vector<float> dense;
  std::vector<int64_t> row_ptr;
  std::vector<int32_t> col_idx;
  std::vector<float> values;

  const float* dense_row(int64_t i) const { return dense.data() + i * cols; }
  SparseRow sparse_row(int64_t i) const {
    const int64_t b = row_ptr[i];
    return SparseRow{col_idx.data() + b, values.data() + b, row_ptr[i + 1] - b};
  }
  int64_t nnz() const { return sparse ? static_cast<int64_t>(values.size()) : rows * cols; }
  // A CSR view for the sparse models (row_ptr null when dense). Implicit, so a Dataset can be
  // passed wherever nn takes SparseRows without nn knowing about datasets.
  SparseRows sparse_rows() const {
    return SparseRows{sparse ? row_ptr.data() : nullptr, col_idx.data(), values.data(), labels.data(), rows, cols,
                      source};
  }
  operator SparseRows() const { return sparse_rows(); }  // NOLINT(google-explicit-constructor)

  void validate() const;
  // Per-class example counts, size num_classes.
  std::vector<int64_t> class_counts() const;
  // A one-line description: "a9a.gz: 32561 x 123 sparse (451592 nnz), 2 classes".
  std::string describe() const;
};

// The examples of one train/test pair; `test` may be empty (rows == 0).
struct DataSplit {
  Dataset train;
  Dataset test;
};

}  // namespace dtrain::data

namespace dtrain::data {

// The rows `ids` of `ds`, in that order (labels, classes and label map kept).
Dataset subset(const Dataset& ds, const std::vector<int64_t>& ids);
// A seeded random split: `fraction` of the rows become the test part (the rest, train). The
// split depends only on (rows, fraction, seed).
DataSplit holdout_split(const Dataset& ds, double fraction, uint64_t seed);

}  // namespace dtrain::data

namespace dtrain::data {

// Scales every row to unit L2 norm (rows of all zeros stay zero). Term-count data such as
// news20 trains far better this way (LIBSVM's "news20.scale" is the same idea).
void normalize_rows(Dataset& ds);

}  // namespace dtrain::data
