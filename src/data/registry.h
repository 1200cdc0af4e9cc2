// data/registry.h — dataset names as the CLI takes them.
//
//   fashion-mnist            Fashion-MNIST from /usr/share/datasets/fashion-mnist (Debian
//                            package dataset-fashion-mnist) or $DTRAIN_SHARED_DATA/fashion-mnist
//   fashion-mnist:DIR        Fashion-MNIST IDX files in DIR
//   mnist[:DIR]              MNIST IDX files in DIR (default $DTRAIN_SHARED_DATA/mnist)
//   libsvm:FILE[,TESTFILE]   LIBSVM text; the test file reuses the training feature count
//   csv:FILE[,TESTFILE]      numeric CSV, label in the first column
//   text:FILE                next-character prediction from a plain or gzipped text file
//   a9a | w8a | news20       shortcuts for the LIBSVM files in $DTRAIN_SHARED_DATA
//
// Contract: load_dataset(spec) returns train and test parts. When the source has no test
// file, a seeded 20% of the training file is held out (the same rows every run). An unknown
// name throws InvalidArgument listing the valid ones; a missing file throws IoError naming
// every place that was searched.
// Thread-safety: stateless.
#pragma once

#include <string>

#include "data/dataset.h"

namespace dtrain::data {

DataSplit load_dataset(const std::string& spec);
// One line per accepted form, for --help.
std::string dataset_help();

}  // namespace dtrain::data
