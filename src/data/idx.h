// data/idx.h — the IDX format of MNIST and Fashion-MNIST.
//
// Format (big-endian): two zero bytes, a type byte (0x08 = unsigned byte, the only type these
// datasets use), the number of dimensions d, then d uint32 sizes, then the data in row-major
// order. Images are 3-d (count, rows, cols; magic 2051) and labels 1-d (magic 2049).
//
// Contract
// - read_idx(path) parses a plain or .gz file; a bad magic number, unsupported type, a file
//   shorter or longer than its header says throws Corrupt naming the file and the byte offset.
// - load_idx_pair(images, labels) returns a dense Dataset with pixels scaled to [0, 1] and
//   10 classes (or 1 + the largest label), checking both files agree on the count.
// - load_mnist_dir(dir) finds {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] in dir.
// Thread-safety: stateless.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace dtrain::data {

struct IdxArray {
  std::vector<uint32_t> dims;
  std::vector<uint8_t> data;
};

IdxArray read_idx(const std::string& path);
Dataset load_idx_pair(const std::string& images_path, const std::string& labels_path);
DataSplit load_mnist_dir(const std::string& dir);

}  // namespace dtrain::data
