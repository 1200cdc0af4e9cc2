#include "data/idx.h"

#include <algorithm>

#include "base/error.h"
#include "data/file_reader.h"

namespace dtrain::data {
namespace {

uint32_t be32(const std::string& b, size_t off) {
  return (static_cast<uint32_t>(static_cast<uint8_t>(b[off])) << 24) |
         (static_cast<uint32_t>(static_cast<uint8_t>(b[off + 1])) << 16) |
         (static_cast<uint32_t>(static_cast<uint8_t>(b[off + 2])) << 8) |
         static_cast<uint32_t>(static_cast<uint8_t>(b[off + 3]));
}

std::string find_in_dir(const std::string& dir, const std::string& stem) {
  std::string path = find_existing({dir + "/" + stem + ".gz", dir + "/" + stem});
  DT_CHECK(!path.empty(), IoError,
           "no '" << stem << "' or '" << stem << ".gz' in directory '" << dir << "'");
  return path;
}

}  // namespace

IdxArray read_idx(const std::string& path) {
  const std::string bytes = read_file(path);
  DT_CHECK(bytes.size() >= 4, Corrupt,
           path << ": truncated IDX file: " << bytes.size() << " bytes, the header alone needs at least 4");
  const uint32_t magic = be32(bytes, 0);
  const auto type = static_cast<uint8_t>(bytes[2]);
  const auto ndims = static_cast<uint8_t>(bytes[3]);
  DT_CHECK(bytes[0] == 0 && bytes[1] == 0 && ndims >= 1 && ndims <= 4, Corrupt,
           path << ": bad IDX magic number 0x" << std::hex << magic << std::dec
                << " at byte offset 0 (expected 0x00000801 for labels or 0x00000803 for images)");
  DT_CHECK(type == 0x08, Corrupt,
           path << ": IDX element type 0x" << std::hex << int(type) << std::dec
                << " at byte offset 2 is not supported (only 0x08, unsigned byte)");
  const size_t header = 4 + 4 * size_t{ndims};
  DT_CHECK(bytes.size() >= header, Corrupt,
           path << ": truncated IDX header: " << bytes.size() << " bytes, need " << header << " for "
                << int(ndims) << " dimensions");
  IdxArray out;
  size_t count = 1;
  for (int d = 0; d < ndims; ++d) {
    out.dims.push_back(be32(bytes, 4 + 4 * size_t(d)));
    count *= out.dims.back();
  }
  const size_t have = bytes.size() - header;
  DT_CHECK(have >= count, Corrupt,
           path << ": truncated IDX file: the header promises " << count << " data bytes but the file ends at byte offset "
                << bytes.size() << " (" << have << " data bytes)");
  DT_CHECK(have == count, Corrupt,
           path << ": " << (have - count) << " unexpected trailing bytes after byte offset " << header + count);
  out.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return out;
}

Dataset load_idx_pair(const std::string& images_path, const std::string& labels_path) {
  IdxArray images = read_idx(images_path);
  IdxArray labels = read_idx(labels_path);
  DT_CHECK(images.dims.size() >= 2, Corrupt,
           images_path << ": an image file needs at least 2 dimensions, found " << images.dims.size());
  DT_CHECK(labels.dims.size() == 1, Corrupt,
           labels_path << ": a label file has 1 dimension, found " << labels.dims.size());
  DT_CHECK(images.dims[0] == labels.dims[0], Corrupt,
           images_path << " has " << images.dims[0] << " images but " << labels_path << " has "
                       << labels.dims[0] << " labels");
  Dataset ds;
  ds.source = base_name(images_path);
  ds.rows = images.dims[0];
  ds.cols = 1;
  for (size_t d = 1; d < images.dims.size(); ++d) ds.cols *= images.dims[d];
  ds.dense.resize(static_cast<size_t>(ds.rows * ds.cols));
  constexpr float kScale = 1.0f / 255.0f;
  for (size_t i = 0; i < ds.dense.size(); ++i) ds.dense[i] = static_cast<float>(images.data[i]) * kScale;
  ds.labels.assign(labels.data.begin(), labels.data.end());
  int max_label = 0;
  for (int32_t y : ds.labels) max_label = std::max<int>(max_label, y);
  ds.num_classes = std::max(10, max_label + 1);
  for (int c = 0; c < ds.num_classes; ++c) ds.label_values.push_back(c);
  return ds;
}

DataSplit load_mnist_dir(const std::string& dir) {
  DataSplit split;
  split.train = load_idx_pair(find_in_dir(dir, "train-images-idx3-ubyte"), find_in_dir(dir, "train-labels-idx1-ubyte"));
  split.test = load_idx_pair(find_in_dir(dir, "t10k-images-idx3-ubyte"), find_in_dir(dir, "t10k-labels-idx1-ubyte"));
  DT_CHECK(split.train.cols == split.test.cols, Corrupt,
           dir << ": train images have " << split.train.cols << " pixels but test images " << split.test.cols);
  return split;
}

}  // namespace dtrain::data
