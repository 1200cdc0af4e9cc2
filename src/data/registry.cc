#include "data/registry.h"

#include <functional>
#include <map>

#include "base/env.h"
#include "base/error.h"
#include "data/csv.h"
#include "data/file_reader.h"
#include "data/idx.h"
#include "data/libsvm.h"
#include "data/text.h"

namespace dtrain::data {
namespace {

constexpr double kHoldout = 0.2;
constexpr uint64_t kHoldoutSeed = 0x7e57;

std::string shared_dir() { return env_string("DTRAIN_SHARED_DATA", "/work/shared/data"); }

// First directory of `dirs` holding the training images of an IDX dataset.
std::string find_idx_dir(const std::string& name, const std::vector<std::string>& dirs) {
  std::string tried;
  for (const auto& d : dirs) {
    if (!find_existing({d + "/train-images-idx3-ubyte.gz", d + "/train-images-idx3-ubyte"}).empty()) return d;
    tried += (tried.empty() ? "" : ", ") + d;
  }
  DT_THROW(IoError, "cannot find " << name << " (searched " << tried
                                   << "); install the Debian package dataset-fashion-mnist or pass " << name
                                   << ":DIR");
}

std::pair<std::string, std::string> split_pair(const std::string& arg) {
  auto comma = arg.find(',');
  if (comma == std::string::npos) return {arg, ""};
  return {arg.substr(0, comma), arg.substr(comma + 1)};
}

DataSplit libsvm_split(const std::string& train_path, const std::string& test_path) {
  DataSplit s;
  Dataset all = load_libsvm(train_path);
  if (test_path.empty()) return holdout_split(all, kHoldout, kHoldoutSeed);
  s.test = load_libsvm_test(test_path, all);
  s.train = std::move(all);
  return s;
}

DataSplit shared_libsvm(const std::string& name, const std::string& train, const std::string& test) {
  const std::string dir = shared_dir() + "/" + name + "/";
  DT_CHECK(file_exists(dir + train), IoError,
           "cannot find '" << dir + train << "'; set DTRAIN_SHARED_DATA to the folder holding " << name
                           << "/ or use libsvm:FILE");
  return libsvm_split(dir + train, test.empty() ? "" : dir + test);
}

using Loader = std::function<DataSplit(const std::string& arg)>;

const std::map<std::string, Loader>& loaders() {
  static const std::map<std::string, Loader> table = {
      {"fashion-mnist",
       [](const std::string& arg) {
         if (!arg.empty()) return load_mnist_dir(arg);
         return load_mnist_dir(find_idx_dir(
             "fashion-mnist", {"/usr/share/datasets/fashion-mnist", shared_dir() + "/fashion-mnist"}));
       }},
      {"mnist",
       [](const std::string& arg) {
         return load_mnist_dir(arg.empty() ? find_idx_dir("mnist", {shared_dir() + "/mnist"}) : arg);
       }},
      {"libsvm",
       [](const std::string& arg) {
         auto [train, test] = split_pair(arg);
         DT_CHECK(!train.empty(), InvalidArgument, "libsvm needs a file: --data libsvm:FILE[,TESTFILE]");
         return libsvm_split(train, test);
       }},
      {"csv",
       [](const std::string& arg) {
         auto [train, test] = split_pair(arg);
         DT_CHECK(!train.empty(), InvalidArgument, "csv needs a file: --data csv:FILE[,TESTFILE]");
         Dataset all = load_csv(train);
         if (test.empty()) return holdout_split(all, kHoldout, kHoldoutSeed);
         DataSplit s;
         s.test = load_csv_test(test, all);
         s.train = std::move(all);
         return s;
       }},
      {"text",
       [](const std::string& arg) {
         DT_CHECK(!arg.empty(), InvalidArgument, "text needs a file: --data text:FILE");
         TextData t = load_text(arg);
         const auto n = static_cast<int64_t>(t.ids.size());
         const int64_t cut = n - n / 10;  // the last 10% of the text is the test part
         return DataSplit{next_char_dataset(t, 3, 0, cut), next_char_dataset(t, 3, cut, n)};
       }},
      {"a9a", [](const std::string&) { return shared_libsvm("a9a", "a9a.gz", "a9a.t.gz"); }},
      {"w8a", [](const std::string&) { return shared_libsvm("w8a", "w8a.gz", ""); }},
      {"news20", [](const std::string&) { return shared_libsvm("news20", "news20.gz", ""); }},
  };
  return table;
}

}  // namespace

std::string dataset_help() {
  return "fashion-mnist[:DIR] | mnist[:DIR] | libsvm:FILE[,TESTFILE] | csv:FILE[,TESTFILE] | text:FILE | a9a | w8a | news20";
}

DataSplit load_dataset(const std::string& spec) {
  auto colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  const std::string arg = colon == std::string::npos ? "" : spec.substr(colon + 1);
  auto it = loaders().find(name);
  DT_CHECK(it != loaders().end(), InvalidArgument,
           "unknown dataset '" << spec << "'; use one of: " << dataset_help());
  DataSplit s = it->second(arg);
  s.train.validate();
  if (s.test.rows > 0) s.test.validate();
  return s;
}

}  // namespace dtrain::data
