#include "data/libsvm.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include "base/error.h"
#include "base/log.h"
#include "data/file_reader.h"

namespace dtrain::data {
namespace {

// Raw parse result before labels become classes.
struct RawRows {
  std::vector<double> labels;
  std::vector<int64_t> lines;  // 1-based line number of each example, for later messages
  std::vector<int64_t> row_ptr{0};
  std::vector<int32_t> col_idx;
  std::vector<float> values;
  int64_t max_index = 0;
  int64_t max_index_line = 0;
  int64_t dropped = 0;
};

// The widest feature space a file may declare by its indices alone. A model allocates
// classes x features parameters, so an index must be justified by the data: past 2^24
// features (64 MiB per class in float32) the file must hold at least one value per 16
// features, as real sparse sets do (url: 3.2 M features, 277 M values; kdd2010: 20 M, 300 M+).
// A 50-byte file with index 300,000,000 is an error, not a 2.3 GB allocation.
constexpr int64_t kFreeFeatures = int64_t{1} << 24;
constexpr int64_t kFeaturesPerValue = 16;

// A cursor over the text that knows its line and the offset where the line starts.
class Scanner {
 public:
  Scanner(const std::string& text, const std::string& name) : t_(text), name_(name) {}

  [[noreturn]] void fail(size_t at, const std::string& what) const {
    DT_THROW(Corrupt, name_ << ": line " << line_ << ", byte offset " << at << ": " << what);
  }
  std::string token_at(size_t b) const {
    size_t e = b;
    while (e < t_.size() && t_[e] != ' ' && t_[e] != '\t' && t_[e] != '\n' && t_[e] != '\r') ++e;
    std::string tok = t_.substr(b, std::min<size_t>(e - b, 40));
    return "'" + tok + "'";
  }

  const std::string& t_;
  const std::string& name_;
  size_t pos = 0;
  int64_t line_ = 1;
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }

RawRows parse_raw(const std::string& text, const std::string& name, int64_t limit) {
  RawRows r;
  Scanner s(text, name);
  const char* base = text.data();
  const size_t n = text.size();
  size_t& p = s.pos;
  while (p < n) {
    // One line: [label [pairs]] [# comment] \n
    while (p < n && is_space(text[p])) ++p;
    if (p >= n) break;
    if (text[p] == '\n' || text[p] == '#') {
      while (p < n && text[p] != '\n') ++p;
      ++p;
      ++s.line_;
      continue;
    }
    double label = 0;
    const size_t label_at = p;
    if (text[p] == '+') ++p;  // from_chars does not take a leading '+', LIBSVM files do ("+1")
    auto [lend, lec] = std::from_chars(base + p, base + n, label);
    if (lec != std::errc() || (lend < base + n && !is_space(*lend) && *lend != '\n'))
      s.fail(label_at, "expected a numeric label, got " + s.token_at(label_at));
    if (!std::isfinite(label)) s.fail(label_at, "the label is not a finite number");
    p = static_cast<size_t>(lend - base);
    int64_t prev_index = 0;
    for (;;) {
      while (p < n && is_space(text[p])) ++p;
      if (p >= n || text[p] == '\n' || text[p] == '#') break;
      const size_t tok = p;
      if (n - p >= 4 && text.compare(p, 4, "qid:") == 0) {
        while (p < n && !is_space(text[p]) && text[p] != '\n') ++p;
        continue;
      }
      int64_t index = 0;
      auto [iend, iec] = std::from_chars(base + p, base + n, index);
      if (iec != std::errc() || iend >= base + n || *iend != ':')
        s.fail(tok, "expected 'index:value', got " + s.token_at(tok));
      if (index < 1) s.fail(tok, "feature index " + std::to_string(index) + " is not >= 1 (indices are 1-based)");
      if (index <= prev_index)
        s.fail(tok, "feature index " + std::to_string(index) + " is not greater than the previous index " +
                        std::to_string(prev_index) + " (indices must be strictly increasing)");
      prev_index = index;
      p = static_cast<size_t>(iend - base) + 1;
      float value = 0;
      if (p < n && text[p] == '+') ++p;
      auto [vend, vec] = std::from_chars(base + p, base + n, value);
      if (vec != std::errc() || (vend < base + n && !is_space(*vend) && *vend != '\n' && *vend != '#'))
        s.fail(tok, "expected a numeric value after '" + std::to_string(index) + ":', got " + s.token_at(tok));
      if (!std::isfinite(value)) s.fail(tok, "feature value is not a finite number");
      p = static_cast<size_t>(vend - base);
      if (limit > 0 && index > limit) {
        ++r.dropped;
        continue;
      }
      if (index > INT32_MAX) s.fail(tok, "feature index " + std::to_string(index) + " is too large");
      if (index > r.max_index) {
        r.max_index = index;
        r.max_index_line = s.line_;
      }
      r.col_idx.push_back(static_cast<int32_t>(index - 1));
      r.values.push_back(value);
    }
    while (p < n && text[p] != '\n') ++p;  // a trailing comment
    r.labels.push_back(label);
    r.lines.push_back(s.line_);
    r.row_ptr.push_back(static_cast<int64_t>(r.col_idx.size()));
    ++p;
    ++s.line_;
  }
  return r;
}

Dataset to_dataset(RawRows&& r, const std::string& name, int64_t cols, const std::vector<double>& label_values) {
  Dataset ds;
  ds.source = name;
  ds.sparse = true;
  ds.rows = static_cast<int64_t>(r.labels.size());
  ds.cols = cols;
  ds.label_values = label_values;
  ds.num_classes = static_cast<int>(label_values.size());
  std::map<double, int32_t> cls;
  for (size_t c = 0; c < label_values.size(); ++c) cls[label_values[c]] = static_cast<int32_t>(c);
  ds.labels.reserve(r.labels.size());
  for (size_t i = 0; i < r.labels.size(); ++i) {
    auto it = cls.find(r.labels[i]);
    DT_CHECK(it != cls.end(), Corrupt,
             name << ": line " << r.lines[i] << ": label " << r.labels[i]
                  << " does not occur in the training file (its labels define the classes)");
    ds.labels.push_back(it->second);
  }
  ds.row_ptr = std::move(r.row_ptr);
  ds.col_idx = std::move(r.col_idx);
  ds.values = std::move(r.values);
  return ds;
}

}  // namespace

Dataset parse_libsvm(const std::string& text, const std::string& name, int64_t num_features) {
  RawRows r = parse_raw(text, name, 0);
  DT_CHECK(!r.labels.empty(), Corrupt, name << ": no examples (the file is empty)");
  if (num_features > 0)
    DT_CHECK(r.max_index <= num_features, InvalidArgument,
             name << ": feature index " << r.max_index << " exceeds the requested " << num_features << " features");
  std::vector<double> labels = r.labels;
  std::sort(labels.begin(), labels.end());
  labels.erase(std::unique(labels.begin(), labels.end()), labels.end());
  const int64_t nnz = static_cast<int64_t>(r.values.size());
  if (num_features <= 0 && r.max_index > kFreeFeatures && r.max_index / kFeaturesPerValue > nnz)
    DT_THROW(Corrupt, name << ": line " << r.max_index_line << ": feature index " << r.max_index << " in a file with only "
                           << nnz << " values: a model over " << r.max_index << " features would need "
                           << (r.max_index * 4 * static_cast<int64_t>(labels.size()) >> 20)
                           << " MiB or more; renumber the features densely (indices are 1-based and need not skip)");
  const int64_t cols = num_features > 0 ? num_features : r.max_index;
  return to_dataset(std::move(r), name, cols, labels);
}

Dataset load_libsvm(const std::string& path, int64_t num_features) {
  Dataset ds = parse_libsvm(read_file(path), path, num_features);
  ds.source = base_name(path);
  return ds;
}

Dataset load_libsvm_test(const std::string& path, const Dataset& train) {
  DT_CHECK(train.sparse, InvalidArgument, "a LIBSVM test file needs a LIBSVM training set");
  RawRows r = parse_raw(read_file(path), path, train.cols);
  DT_CHECK(!r.labels.empty(), Corrupt, path << ": no examples (the file is empty)");
  if (r.dropped > 0) {
    DT_LOG(Warn) << path << ": dropped " << r.dropped << " values of features past the training file's "
                 << train.cols << " features";
  }
  Dataset ds = to_dataset(std::move(r), path, train.cols, train.label_values);
  ds.source = base_name(path);
  return ds;
}

}  // namespace dtrain::data
