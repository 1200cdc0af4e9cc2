#include "data/dataset.h"

#include <sstream>

#include "base/error.h"

namespace dtrain::data {

void Dataset::validate() const {
  DT_CHECK(rows >= 0 && cols >= 0, Corrupt, source << ": negative shape " << rows << " x " << cols);
  DT_CHECK_EQ(static_cast<int64_t>(labels.size()), rows, Corrupt, source << ": one label per row");
  DT_CHECK(num_classes >= 1 || rows == 0, Corrupt, source << ": no classes");
  for (int64_t i = 0; i < rows; ++i)
    DT_CHECK(labels[i] >= 0 && labels[i] < num_classes, Corrupt,
             source << ": example " << i << " has class " << labels[i] << ", outside [0, " << num_classes << ")");
  if (!sparse) {
    DT_CHECK_EQ(static_cast<int64_t>(dense.size()), rows * cols, Corrupt, source << ": dense storage size");
    return;
  }
  DT_CHECK_EQ(static_cast<int64_t>(row_ptr.size()), rows + 1, Corrupt, source << ": row_ptr size");
  DT_CHECK(row_ptr[0] == 0, Corrupt, source << ": row_ptr[0] must be 0");
  DT_CHECK_EQ(static_cast<int64_t>(col_idx.size()), row_ptr[rows], Corrupt, source << ": col_idx size");
  DT_CHECK_EQ(col_idx.size(), values.size(), Corrupt, source << ": values size");
  for (int64_t i = 0; i < rows; ++i) {
    DT_CHECK(row_ptr[i] <= row_ptr[i + 1], Corrupt, source << ": row_ptr decreases at row " << i);
    for (int64_t k = row_ptr[i]; k < row_ptr[i + 1]; ++k) {
      DT_CHECK(col_idx[k] >= 0 && col_idx[k] < cols, Corrupt,
               source << ": row " << i << " has column " << col_idx[k] << " outside [0, " << cols << ")");
      DT_CHECK(k == row_ptr[i] || col_idx[k - 1] < col_idx[k], Corrupt,
               source << ": row " << i << " columns are not strictly increasing");
    }
  }
}

std::vector<int64_t> Dataset::class_counts() const {
  std::vector<int64_t> counts(static_cast<size_t>(num_classes), 0);
  for (int32_t y : labels) ++counts[static_cast<size_t>(y)];
  return counts;
}

std::string Dataset::describe() const {
  std::ostringstream os;
  os << source << ": " << rows << " x " << cols << (sparse ? " sparse" : " dense");
  if (sparse) os << " (" << nnz() << " nnz)";
  os << ", " << num_classes << " classes";
  return os.str();
}

}  // namespace dtrain::data

#include <algorithm>

#include "data/sampler.h"

namespace dtrain::data {

Dataset subset(const Dataset& ds, const std::vector<int64_t>& ids) {
  Dataset out;
  out.source = ds.source;
  out.rows = static_cast<int64_t>(ids.size());
  out.cols = ds.cols;
  out.num_classes = ds.num_classes;
  out.label_values = ds.label_values;
  out.sparse = ds.sparse;
  out.labels.reserve(ids.size());
  if (ds.sparse) out.row_ptr.push_back(0);
  for (int64_t i : ids) {
    DT_CHECK(i >= 0 && i < ds.rows, InvalidArgument, "subset: row " << i << " outside [0, " << ds.rows << ")");
    out.labels.push_back(ds.labels[static_cast<size_t>(i)]);
    if (ds.sparse) {
      SparseRow r = ds.sparse_row(i);
      out.col_idx.insert(out.col_idx.end(), r.idx, r.idx + r.nnz);
      out.values.insert(out.values.end(), r.val, r.val + r.nnz);
      out.row_ptr.push_back(static_cast<int64_t>(out.col_idx.size()));
    } else {
      const float* row = ds.dense_row(i);
      out.dense.insert(out.dense.end(), row, row + ds.cols);
    }
  }
  return out;
}

DataSplit holdout_split(const Dataset& ds, double fraction, uint64_t seed) {
  DT_CHECK(fraction > 0 && fraction < 1, InvalidArgument, "the held-out fraction must be in (0, 1), got " << fraction);
  std::vector<int64_t> order = epoch_permutation(ds.rows, seed, 0);
  const auto n_test = static_cast<size_t>(static_cast<double>(ds.rows) * fraction);
  std::vector<int64_t> test(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n_test));
  std::vector<int64_t> train(order.begin() + static_cast<std::ptrdiff_t>(n_test), order.end());
  std::sort(test.begin(), test.end());
  std::sort(train.begin(), train.end());
  DataSplit split{subset(ds, train), subset(ds, test)};
  split.test.source = ds.source + " (held-out " + std::to_string(n_test) + ")";
  return split;
}

}  // namespace dtrain::data

#include <cmath>

namespace dtrain::data {

void normalize_rows(Dataset& ds) {
  for (int64_t i = 0; i < ds.rows; ++i) {
    float* v = ds.sparse ? ds.values.data() + ds.row_ptr[i] : ds.dense.data() + i * ds.cols;
    const int64_t n = ds.sparse ? ds.row_ptr[i + 1] - ds.row_ptr[i] : ds.cols;
    double ss = 0;
    for (int64_t k = 0; k < n; ++k) ss += static_cast<double>(v[k]) * v[k];
    if (ss == 0) continue;
    const auto inv = static_cast<float>(1.0 / std::sqrt(ss));
    for (int64_t k = 0; k < n; ++k) v[k] *= inv;
  }
}

}  // namespace dtrain::data
