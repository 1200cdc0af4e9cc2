// data/csv.h — numeric CSV: one example per line, the label in the first column.
//
// Contract
// - load_csv(path) reads a plain or .gz file of comma-separated numbers. The first line is a
//   header when its first field is not a number (it is then skipped). Every line must have
//   the same number of fields as the first data line. Labels become classes like LIBSVM's:
//   the sorted distinct labels of the training file are classes 0..k-1.
// - load_csv_test(path, train) reuses the training set's column count and label map.
// - A bad field throws Corrupt "FILE: line L, byte offset B: ..." naming the field.
// Thread-safety: stateless.
#pragma once

#include <string>

#include "data/dataset.h"

namespace dtrain::data {

Dataset parse_csv(const std::string& text, const std::string& name, const Dataset* train = nullptr);
Dataset load_csv(const std::string& path);
Dataset load_csv_test(const std::string& path, const Dataset& train);

}  // namespace dtrain::data
