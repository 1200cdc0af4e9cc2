// data/registry.h — dataset names as the CLI takes them, and where the named ones live.
//
//   fashion-mnist            Fashion-MNIST from /usr/share/datasets/fashion-mnist (Debian
//                            package dataset-fashion-mnist), else DATA_DIR/fashion-mnist
//   fashion-mnist:DIR        Fashion-MNIST IDX files in DIR
//   mnist[:DIR]              MNIST IDX files in DIR (default DATA_DIR/mnist)
//   libsvm:FILE[,TESTFILE]   LIBSVM text; the test file reuses the training feature count
//   csv:FILE[,TESTFILE]      numeric CSV, label in the first column
//   text:FILE                next-character prediction from a plain or gzipped text file
//   a9a | w8a | news20       the LIBSVM files DATA_DIR/NAME/NAME.gz (a9a also a9a.t.gz)
//   tinyshakespeare          text from DATA_DIR/tinyshakespeare/input.txt[.gz]
//
// DATA_DIR is the data directory the caller passes: Settings::data_dir() (base/settings.h),
// i.e. $DTRAIN_DATA_DIR, else $XDG_DATA_HOME/dtrain, else ~/.local/share/dtrain. No path of
// any particular machine is compiled in; /usr/share/datasets is where Debian's dataset-*
// packages install.
//
// Contract: load_dataset(spec, data_dir) returns train and test parts. When the source has no
// test file, a seeded 20% of the training file is held out (the same rows every run). An
// unknown name throws InvalidArgument listing the valid ones; a named dataset that is not
// found throws IoError naming every place searched and how to obtain it.
// named_datasets(data_dir) reports, for `dtrain data`, each named dataset: the places looked
// in, where it was found (or ""), and how to obtain it.
// Thread-safety: stateless.
#pragma once

#include <string>
#include <vector>

#include "data/dataset.h"

namespace dtrain::data {

DataSplit load_dataset(const std::string& spec, const std::string& data_dir);
// The process's data directory (Settings::process().data_dir()). For callers that do not pass
// one yet; prefer the two-argument form with the directory from the caller's options.
DataSplit load_dataset(const std::string& spec);
// One line per accepted form, for --help.
std::string dataset_help();

struct NamedDataset {
  std::string name;
  std::string what;                 // one line: what it is
  std::vector<std::string> places;  // where it is looked for, in order (the file checked)
  std::string found;                // the first place that exists, or ""
  std::string obtain;               // how to get it onto this machine
};
std::vector<NamedDataset> named_datasets(const std::string& data_dir);

}  // namespace dtrain::data
