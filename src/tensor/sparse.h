// tensor/sparse.h — non-owning views of sparse rows (CSR), the form sparse models read.
//
// Contract
// - SparseRow is one row: `nnz` nonzeros, column indices `idx` (0-based, strictly increasing)
//   and values `val`.
// - SparseRows views `rows` labelled rows with `cols` features in CSR form: row i's nonzeros are
//   col_idx/values[row_ptr[i], row_ptr[i+1]), labels[i] its class. A view of dense data has
//   row_ptr == nullptr (is_sparse() false). `source` names the data, for messages.
// - The viewed arrays belong to someone else (data::Dataset) and must outlive the view.
// Thread-safety: read-only views; any number of threads may read.
#pragma once

#include <cstdint>
#include <string_view>

namespace dtrain {

struct SparseRow {
  const int32_t* idx = nullptr;
  const float* val = nullptr;
  int64_t nnz = 0;
};

struct SparseRows {
  const int64_t* row_ptr = nullptr;
  const int32_t* col_idx = nullptr;
  const float* values = nullptr;
  const int32_t* labels = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  std::string_view source;

  bool is_sparse() const { return row_ptr != nullptr; }
  SparseRow row(int64_t i) const {
    const int64_t b = row_ptr[i];
    return SparseRow{col_idx + b, values + b, row_ptr[i + 1] - b};
  }
};

}  // namespace dtrain
