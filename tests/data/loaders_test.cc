// Loader tests on small files written by the test (valid and malformed), and on the real
// datasets when $DTRAIN_DATA_DIR holds them.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/error.h"
#include "data/csv.h"
#include "data/file_reader.h"
#include "data/idx.h"
#include "data/libsvm.h"
#include "data/registry.h"
#include "data/text.h"

namespace dtrain::data {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("dtrain_data_test_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}
void write_gz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  gzclose(f);
}

std::string be32(uint32_t v) {
  return {char(v >> 24), char((v >> 16) & 0xff), char((v >> 8) & 0xff), char(v & 0xff)};
}
std::string idx_images(uint32_t n, uint32_t r, uint32_t c) {
  std::string s = be32(0x803) + be32(n) + be32(r) + be32(c);
  for (uint32_t i = 0; i < n * r * c; ++i) s.push_back(static_cast<char>(i % 256));
  return s;
}
std::string idx_labels(uint32_t n) {
  std::string s = be32(0x801) + be32(n);
  for (uint32_t i = 0; i < n; ++i) s.push_back(static_cast<char>(i % 10));
  return s;
}

// Runs fn, expects exception E, and returns its message.
template <class E, class F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no exception";
  return "";
}

TEST(Idx, ReadsPlainAndGzipIdentically) {
  TempDir d;
  write(d.file("img"), idx_images(3, 2, 2));
  write_gz(d.file("img.gz"), idx_images(3, 2, 2));
  IdxArray a = read_idx(d.file("img"));
  IdxArray b = read_idx(d.file("img.gz"));
  EXPECT_EQ(a.dims, (std::vector<uint32_t>{3, 2, 2}));
  EXPECT_EQ(a.data, b.data);
  EXPECT_EQ(a.data[5], 5);
}

TEST(Idx, PairScalesPixelsAndKeepsLabels) {
  TempDir d;
  write_gz(d.file("train-images-idx3-ubyte.gz"), idx_images(4, 2, 3));
  write(d.file("train-labels-idx1-ubyte"), idx_labels(4));
  write(d.file("t10k-images-idx3-ubyte"), idx_images(2, 2, 3));
  write_gz(d.file("t10k-labels-idx1-ubyte.gz"), idx_labels(2));
  DataSplit s = load_mnist_dir(d.file(""));
  EXPECT_EQ(s.train.rows, 4);
  EXPECT_EQ(s.train.cols, 6);
  EXPECT_EQ(s.test.rows, 2);
  EXPECT_FLOAT_EQ(s.train.dense[7], 7.0f / 255.0f);
  EXPECT_EQ(s.train.labels[3], 3);
  EXPECT_EQ(s.train.num_classes, 10);
}

TEST(Idx, BadMagicNamesFileAndOffset) {
  TempDir d;
  std::string bytes = idx_images(2, 2, 2);
  bytes[0] = 0x12;
  write(d.file("bad"), bytes);
  std::string msg = error_of<Corrupt>([&] { read_idx(d.file("bad")); });
  EXPECT_NE(msg.find(d.file("bad")), std::string::npos) << msg;
  EXPECT_NE(msg.find("magic"), std::string::npos) << msg;
  EXPECT_NE(msg.find("byte offset 0"), std::string::npos) << msg;
}

TEST(Idx, TruncatedDataIsCorrupt) {
  TempDir d;
  std::string bytes = idx_images(4, 3, 3);
  write(d.file("short"), bytes.substr(0, bytes.size() - 5));
  std::string msg = error_of<Corrupt>([&] { read_idx(d.file("short")); });
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  EXPECT_NE(msg.find("short"), std::string::npos) << msg;
}

TEST(Idx, TruncatedGzipStreamIsCorrupt) {
  TempDir d;
  write_gz(d.file("full.gz"), idx_images(50, 10, 10));
  std::ifstream in(d.file("full.gz"), std::ios::binary);
  std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  write(d.file("cut.gz"), gz.substr(0, gz.size() / 2));
  std::string msg = error_of<Corrupt>([&] { read_idx(d.file("cut.gz")); });
  EXPECT_NE(msg.find("cut.gz"), std::string::npos) << msg;
}

TEST(Idx, MismatchedCountsAndMissingFiles) {
  TempDir d;
  write(d.file("i"), idx_images(3, 2, 2));
  write(d.file("l"), idx_labels(4));
  EXPECT_THROW(load_idx_pair(d.file("i"), d.file("l")), Corrupt);
  std::string msg = error_of<IoError>([&] { read_idx(d.file("nope")); });
  EXPECT_NE(msg.find("nope"), std::string::npos) << msg;
  EXPECT_THROW(load_mnist_dir(d.file("")), IoError);
}

TEST(Libsvm, ParsesRowsLabelsAndComments) {
  Dataset ds = parse_libsvm("+1 1:0.5 3:2 \n# a comment\n\n-1 2:1e-1 # trailing\n+1 qid:3 4:-1\n", "t.svm");
  ds.validate();
  EXPECT_EQ(ds.rows, 3);
  EXPECT_EQ(ds.cols, 4);
  EXPECT_EQ(ds.num_classes, 2);
  EXPECT_EQ(ds.labels, (std::vector<int32_t>{1, 0, 1}));
  EXPECT_EQ(ds.label_values, (std::vector<double>{-1, 1}));
  EXPECT_EQ(ds.row_ptr, (std::vector<int64_t>{0, 2, 3, 4}));
  EXPECT_EQ(ds.col_idx, (std::vector<int32_t>{0, 2, 1, 3}));
  EXPECT_FLOAT_EQ(ds.values[2], 0.1f);
}

TEST(Libsvm, BadTokenNamesFileLineAndOffset) {
  std::string text;
  for (int i = 1; i < 1234; ++i) text += "1 1:1 2:2\n";
  const size_t offset = text.size() + 6;
  text += "1 1:1 x:2\n";
  std::string msg = error_of<Corrupt>([&] { parse_libsvm(text, "train.svm"); });
  EXPECT_NE(msg.find("train.svm: line 1234"), std::string::npos) << msg;
  EXPECT_NE(msg.find("byte offset " + std::to_string(offset)), std::string::npos) << msg;
  EXPECT_NE(msg.find("'x:2'"), std::string::npos) << msg;
}

TEST(Libsvm, RejectsUnsortedZeroIndexAndBadLabel) {
  EXPECT_NE(error_of<Corrupt>([] { parse_libsvm("1 3:1 2:1\n", "f"); }).find("strictly increasing"), std::string::npos);
  EXPECT_NE(error_of<Corrupt>([] { parse_libsvm("1 0:1\n", "f"); }).find("1-based"), std::string::npos);
  EXPECT_NE(error_of<Corrupt>([] { parse_libsvm("1 1:1\nabc 1:1\n", "f"); }).find("line 2"), std::string::npos);
  EXPECT_NE(error_of<Corrupt>([] { parse_libsvm("1 1:zz\n", "f"); }).find("numeric value"), std::string::npos);
  EXPECT_THROW(parse_libsvm("", "f"), Corrupt);
}

// Issue 13: a 50-byte file with feature index 300,000,000 made the model allocate 2.3 GB and
// die with a bare std::bad_alloc; the loader now says which index is not justified.
TEST(Libsvm, HugeIndexInATinyFileIsAClearError) {
  std::string text = "+1 1:0.5 300000000:1\n-1 2:1 7:0.25\n";
  ASSERT_LT(text.size(), 50u);
  std::string msg = error_of<Corrupt>([&] { parse_libsvm(text, "tiny.svm"); });
  EXPECT_NE(msg.find("tiny.svm: line 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("feature index 300000000"), std::string::npos) << msg;
  EXPECT_NE(msg.find("renumber"), std::string::npos) << msg;
  // A wide but justified file (as many values as 1/16 of its features) still loads, sparse.
  std::string wide = "+1";
  for (int64_t i = 1; i <= (int64_t{1} << 24) / 16 + 8; ++i) wide += " " + std::to_string(i * 16) + ":1";
  wide += "\n-1 3:1\n";
  Dataset ds = parse_libsvm(wide, "wide.svm");
  EXPECT_TRUE(ds.sparse);
  EXPECT_GT(ds.cols, int64_t{1} << 24);
  // An explicit feature count is the user's own justification.
  EXPECT_EQ(parse_libsvm(text, "tiny.svm", 300000000).cols, 300000000);
}

TEST(Libsvm, TestFileReusesFeatureCountAndLabelMap) {
  TempDir d;
  write(d.file("train"), "-1 1:1 5:1\n+1 2:1\n");
  write_gz(d.file("test.gz"), "+1 1:1 7:3\n-1 5:2\n");
  Dataset train = load_libsvm(d.file("train"));
  Dataset test = load_libsvm_test(d.file("test.gz"), train);
  EXPECT_EQ(test.cols, 5);
  EXPECT_EQ(test.labels, (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(test.col_idx, (std::vector<int32_t>{0, 4}));  // 7:3 dropped, past the 5 features
  write(d.file("test2"), "-1 1:1\n3 2:1\n");
  std::string msg = error_of<Corrupt>([&] { load_libsvm_test(d.file("test2"), train); });
  EXPECT_NE(msg.find("line 2"), std::string::npos) << msg;
}

TEST(Csv, HeaderLabelsAndErrors) {
  Dataset ds = parse_csv("label,a,b\n3,0.5,1\n7,2,-1\r\n3,0,0\n", "x.csv");
  EXPECT_EQ(ds.rows, 3);
  EXPECT_EQ(ds.cols, 2);
  EXPECT_EQ(ds.labels, (std::vector<int32_t>{0, 1, 0}));
  EXPECT_FLOAT_EQ(ds.dense[3], -1.0f);
  std::string msg = error_of<Corrupt>([] { parse_csv("1,2,3\n1,2,oops\n", "y.csv"); });
  EXPECT_NE(msg.find("y.csv: line 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("oops"), std::string::npos) << msg;
  EXPECT_NE(error_of<Corrupt>([] { parse_csv("1,2,3\n1,2\n", "z.csv"); }).find("2 fields"), std::string::npos);
}

TEST(Text, IdsAndNextCharDataset) {
  TextData t = text_from_string("abcab", "t.txt");
  EXPECT_EQ(t.vocab, (std::vector<uint8_t>{'a', 'b', 'c'}));
  EXPECT_EQ(t.ids, (std::vector<int32_t>{0, 1, 2, 0, 1}));
  Dataset ds = next_char_dataset(t, 2, 0, 5);
  ds.validate();
  EXPECT_EQ(ds.rows, 3);  // positions 2, 3, 4
  EXPECT_EQ(ds.labels, (std::vector<int32_t>{2, 0, 1}));
  // position 2 ('c') sees 'b' one back (column 0*3+1) and 'a' two back (column 1*3+0).
  EXPECT_EQ(ds.col_idx[0], 1);
  EXPECT_EQ(ds.col_idx[1], 3);
}

TEST(Registry, UnknownNameListsChoices) {
  std::string msg = error_of<InvalidArgument>([] { load_dataset("imagenet"); });
  EXPECT_NE(msg.find("libsvm:FILE"), std::string::npos) << msg;
  EXPECT_THROW(load_dataset("libsvm:/nonexistent/file"), IoError);
}

TEST(Registry, NamedDatasetMissingSaysWhereItLookedAndHowToObtainIt) {
  TempDir d;
  std::string msg = error_of<IoError>([&] { load_dataset("a9a", d.file("data")); });
  EXPECT_NE(msg.find(d.file("data") + "/a9a/a9a.gz"), std::string::npos) << msg;
  EXPECT_NE(msg.find("libsvmtools"), std::string::npos) << msg;
  EXPECT_NE(msg.find("DTRAIN_DATA_DIR"), std::string::npos) << msg;
}

TEST(Registry, NamedDatasetsLoadFromTheDataDirectory) {
  TempDir d;
  fs::create_directories(d.file("w8a"));
  std::string rows;
  for (int i = 0; i < 10; ++i) rows += (i % 2 ? "+1 1:1 3:0.5\n" : "-1 2:1\n");
  write_gz(d.file("w8a/w8a.gz"), rows);
  DataSplit s = load_dataset("w8a", d.file(""));
  EXPECT_EQ(s.train.rows + s.test.rows, 10);
  EXPECT_EQ(s.train.cols, 3);

  auto all = named_datasets(d.file(""));
  ASSERT_GE(all.size(), 6u);
  for (const auto& n : all) {
    EXPECT_FALSE(n.places.empty()) << n.name;
    EXPECT_FALSE(n.obtain.empty()) << n.name;
    if (n.name == "w8a") {
      EXPECT_EQ(n.found, d.file("") + "/w8a");
    } else if (n.name == "a9a") {
      EXPECT_EQ(n.found, "");
    } else if (n.name == "fashion-mnist") {
      EXPECT_EQ(n.places.front(), "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
    }
  }
}

// ---- Real data, when present ----

std::string shared(const std::string& rel) {
  const char* dir = std::getenv("DTRAIN_DATA_DIR");
  if (dir == nullptr) return "";
  std::string p = std::string(dir) + "/" + rel;
  return file_exists(p) ? p : "";
}

TEST(RealData, A9aTrainAndTest) {
  std::string train = shared("a9a/a9a.gz"), test = shared("a9a/a9a.t.gz");
  if (train.empty() || test.empty()) GTEST_SKIP() << "DTRAIN_DATA_DIR/a9a not present; skipping the real-file check";
  Dataset tr = load_libsvm(train);
  Dataset te = load_libsvm_test(test, tr);
  EXPECT_EQ(tr.rows, 32561);
  EXPECT_EQ(tr.cols, 123);
  EXPECT_EQ(tr.nnz(), 451592);
  EXPECT_EQ(te.rows, 16281);
  EXPECT_EQ(te.cols, 123);
  EXPECT_EQ(tr.class_counts(), (std::vector<int64_t>{24720, 7841}));
}

TEST(RealData, FashionMnistLabels) {
  std::string labels = shared("fashion-mnist/t10k-labels-idx1-ubyte.gz");
  if (labels.empty()) GTEST_SKIP() << "DTRAIN_DATA_DIR/fashion-mnist not present; skipping the real-file check";
  IdxArray a = read_idx(labels);
  ASSERT_EQ(a.dims, (std::vector<uint32_t>{10000}));
  std::vector<int> counts(10, 0);
  for (uint8_t y : a.data) ++counts[y];
  for (int c : counts) EXPECT_EQ(c, 1000);
}

TEST(RealData, MnistTestSplit) {
  std::string images = shared("mnist/t10k-images-idx3-ubyte.gz");
  std::string labels = shared("mnist/t10k-labels-idx1-ubyte.gz");
  if (images.empty() || labels.empty()) GTEST_SKIP() << "DTRAIN_DATA_DIR/mnist not present; skipping";
  Dataset ds = load_idx_pair(images, labels);
  EXPECT_EQ(ds.rows, 10000);
  EXPECT_EQ(ds.cols, 784);
  EXPECT_EQ(ds.class_counts()[1], 1135);
}

}  // namespace
}  // namespace dtrain::data
