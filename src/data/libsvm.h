// data/libsvm.h — LIBSVM / SVMlight sparse text: "<label> <index>:<value> ...".
//
// Parsing rules: one example per line; indices are 1-based and strictly increasing within a
// line (stored 0-based); blank lines and text after '#' are ignored; "qid:" pairs are
// skipped. Labels are real numbers; the distinct labels of the TRAINING file, sorted, become
// classes 0..k-1 (so -1/+1 -> 0/1 and 1..20 -> 0..19).
//
// Contract
// - load_libsvm(path) parses a plain or .gz file. The number of features is the largest index
//   in the file, or `num_features` when given (> 0): then larger indices throw InvalidArgument.
// - load_libsvm_test(path, train) reads a test file against a training set: it reuses the
//   training file's feature count and label map. Features past that count are dropped (the
//   model has no weight for them; a warning says how many); a label the training file never
//   had throws Corrupt naming the line.
// - Every malformed token throws Corrupt "FILE: line L, byte offset B: <what was wrong>".
// Thread-safety: stateless.
#pragma once

#include <cstdint>
#include <string>

#include "data/dataset.h"

namespace dtrain::data {

Dataset load_libsvm(const std::string& path, int64_t num_features = 0);
Dataset load_libsvm_test(const std::string& path, const Dataset& train);
// Parses LIBSVM text already in memory (`name` is used in messages). Exposed for tests.
Dataset parse_libsvm(const std::string& text, const std::string& name, int64_t num_features = 0);

}  // namespace dtrain::data
