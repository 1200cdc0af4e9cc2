#include "data/registry.h"

#include <functional>
#include <map>

#include "base/error.h"
#include "base/settings.h"
#include "data/csv.h"
#include "data/file_reader.h"
#include "data/idx.h"
#include "data/libsvm.h"
#include "data/text.h"

namespace dtrain::data {
namespace {

constexpr double kHoldout = 0.2;
constexpr uint64_t kHoldoutSeed = 0x7e57;

constexpr const char* kDebianFashionMnist = "/usr/share/datasets/fashion-mnist";

// Where each named dataset is looked for, and how to obtain it. The first entry of `files` is
// the file whose presence says "found"; `dirs` are searched in order.
struct Named {
  const char* name;
  const char* what;
  std::vector<std::string> dirs;  // relative to the data directory unless absolute
  const char* file;               // the file that must exist in one of them
  const char* obtain;
};

std::vector<Named> named_table() {
  return {
      {"fashion-mnist", "Zalando's 70,000 28x28 clothing images, 10 classes (IDX)",
       {kDebianFashionMnist, "fashion-mnist"}, "train-images-idx3-ubyte.gz",
       "install the Debian package: sudo apt-get install dataset-fashion-mnist; or put the four IDX files "
       "({train,t10k}-{images-idx3,labels-idx1}-ubyte.gz from github.com/zalandoresearch/fashion-mnist) in "
       "DATA_DIR/fashion-mnist/"},
      {"mnist", "LeCun's 70,000 28x28 handwritten digits, 10 classes (IDX)", {"mnist"}, "train-images-idx3-ubyte.gz",
       "put the four IDX files ({train,t10k}-{images-idx3,labels-idx1}-ubyte.gz, from yann.lecun.com/exdb/mnist) in "
       "DATA_DIR/mnist/"},
      {"a9a", "Adult census income, 123 binary features, 2 classes (LIBSVM)", {"a9a"}, "a9a.gz",
       "download a9a and a9a.t from www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary.html, gzip them and put "
       "a9a.gz and a9a.t.gz in DATA_DIR/a9a/"},
      {"w8a", "web page categories, 300 sparse binary features, 2 classes (LIBSVM)", {"w8a"}, "w8a.gz",
       "download w8a from www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary.html, gzip it and put w8a.gz in "
       "DATA_DIR/w8a/"},
      {"news20", "20 newsgroups, 62,061 sparse term-count features, 20 classes (LIBSVM)", {"news20"}, "news20.gz",
       "download news20.bz2 from www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/multiclass.html, recompress it with "
       "gzip and put news20.gz in DATA_DIR/news20/"},
      {"tinyshakespeare", "1 MB of Shakespeare's plays, for next-character models (text)", {"tinyshakespeare"},
       "input.txt.gz",
       "download input.txt from github.com/karpathy/char-rnn (data/tinyshakespeare), gzip it and put input.txt.gz "
       "in DATA_DIR/tinyshakespeare/"},
  };
}

std::string place(const std::string& data_dir, const std::string& dir) {
  if (!dir.empty() && dir[0] == '/') return dir;
  return (data_dir.empty() ? std::string("DATA_DIR") : data_dir) + "/" + dir;
}

NamedDataset status(const Named& n, const std::string& data_dir) {
  NamedDataset d{n.name, n.what, {}, "", n.obtain};
  for (const auto& dir : n.dirs) {
    std::string file = place(data_dir, dir) + "/" + n.file;
    d.places.push_back(file);
    if (d.found.empty() && file_exists(file)) d.found = place(data_dir, dir);
  }
  // A plain (not gzipped) file is as good.
  if (d.found.empty()) {
    std::string plain(n.file);
    if (plain.size() > 3 && plain.compare(plain.size() - 3, 3, ".gz") == 0) {
      plain.resize(plain.size() - 3);
      for (const auto& dir : n.dirs)
        if (d.found.empty() && file_exists(place(data_dir, dir) + "/" + plain)) d.found = place(data_dir, dir);
    }
  }
  return d;
}

// The folder holding named dataset `name`, or IoError saying where it was looked for and how
// to obtain it.
std::string find_named(const std::string& name, const std::string& data_dir) {
  for (const auto& n : named_table()) {
    if (name != n.name) continue;
    NamedDataset d = status(n, data_dir);
    if (!d.found.empty()) return d.found;
    std::string tried;
    for (const auto& p : d.places) tried += (tried.empty() ? "" : ", ") + p;
    DT_THROW(IoError, "cannot find dataset " << name << " (looked for " << tried << "); to obtain it: " << d.obtain
                                             << (data_dir.empty() ? "" : " (DATA_DIR is " + data_dir + ")")
                                             << "; set DTRAIN_DATA_DIR to use another folder, see 'dtrain data'");
  }
  DT_THROW(InvalidArgument, "no named dataset '" << name << "'");
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

DataSplit named_libsvm(const std::string& name, const std::string& data_dir, const std::string& train,
                       const std::string& test) {
  const std::string dir = find_named(name, data_dir) + "/";
  const std::string train_file = find_existing({dir + train, dir + train.substr(0, train.size() - 3)});
  std::string test_file;
  if (!test.empty()) test_file = find_existing({dir + test, dir + test.substr(0, test.size() - 3)});
  return libsvm_split(train_file, test_file);
}

DataSplit text_split(const std::string& file) {
  TextData t = load_text(file);
  const auto n = static_cast<int64_t>(t.ids.size());
  const int64_t cut = n - n / 10;  // the last 10% of the text is the test part
  return DataSplit{next_char_dataset(t, 3, 0, cut), next_char_dataset(t, 3, cut, n)};
}

using Loader = std::function<DataSplit(const std::string& arg, const std::string& data_dir)>;

const std::map<std::string, Loader>& loaders() {
  static const std::map<std::string, Loader> table = {
      {"fashion-mnist",
       [](const std::string& arg, const std::string& data_dir) {
         return load_mnist_dir(arg.empty() ? find_named("fashion-mnist", data_dir) : arg);
       }},
      {"mnist",
       [](const std::string& arg, const std::string& data_dir) {
         return load_mnist_dir(arg.empty() ? find_named("mnist", data_dir) : arg);
       }},
      {"libsvm",
       [](const std::string& arg, const std::string&) {
         auto [train, test] = split_pair(arg);
         DT_CHECK(!train.empty(), InvalidArgument, "libsvm needs a file: --data libsvm:FILE[,TESTFILE]");
         return libsvm_split(train, test);
       }},
      {"csv",
       [](const std::string& arg, const std::string&) {
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
       [](const std::string& arg, const std::string&) {
         DT_CHECK(!arg.empty(), InvalidArgument, "text needs a file: --data text:FILE");
         return text_split(arg);
       }},
      {"tinyshakespeare",
       [](const std::string&, const std::string& data_dir) {
         const std::string dir = find_named("tinyshakespeare", data_dir) + "/";
         return text_split(find_existing({dir + "input.txt.gz", dir + "input.txt"}));
       }},
      {"a9a", [](const std::string&, const std::string& d) { return named_libsvm("a9a", d, "a9a.gz", "a9a.t.gz"); }},
      {"w8a", [](const std::string&, const std::string& d) { return named_libsvm("w8a", d, "w8a.gz", ""); }},
      {"news20", [](const std::string&, const std::string& d) { return named_libsvm("news20", d, "news20.gz", ""); }},
  };
  return table;
}

}  // namespace

std::string dataset_help() {
  return "fashion-mnist[:DIR] | mnist[:DIR] | libsvm:FILE[,TESTFILE] | csv:FILE[,TESTFILE] | text:FILE | a9a | w8a | "
         "news20 | tinyshakespeare (named datasets: see 'dtrain data')";
}

std::vector<NamedDataset> named_datasets(const std::string& data_dir) {
  std::vector<NamedDataset> out;
  for (const auto& n : named_table()) out.push_back(status(n, data_dir));
  return out;
}

DataSplit load_dataset(const std::string& spec) { return load_dataset(spec, Settings::process().data_dir()); }

DataSplit load_dataset(const std::string& spec, const std::string& data_dir) {
  auto colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  const std::string arg = colon == std::string::npos ? "" : spec.substr(colon + 1);
  auto it = loaders().find(name);
  DT_CHECK(it != loaders().end(), InvalidArgument,
           "unknown dataset '" << spec << "'; use one of: " << dataset_help());
  DataSplit s = it->second(arg, data_dir);
  s.train.validate();
  if (s.test.rows > 0) s.test.validate();
  return s;
}

}  // namespace dtrain::data
