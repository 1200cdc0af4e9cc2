#include "data/csv.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include "base/error.h"
#include "data/file_reader.h"

namespace dtrain::data {
namespace {

// Parses one field [b, e) as a number; false when it is not one.
bool parse_number(const char* b, const char* e, double& out) {
  while (b < e && (*b == ' ' || *b == '\t')) ++b;
  while (e > b && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) --e;
  if (b < e && *b == '+') ++b;
  if (b == e) return false;
  auto [end, ec] = std::from_chars(b, e, out);
  return ec == std::errc() && end == e && std::isfinite(out);
}

}  // namespace

Dataset parse_csv(const std::string& text, const std::string& name, const Dataset* train) {
  const char* base = text.data();
  const size_t n = text.size();
  std::vector<double> raw_labels;
  std::vector<int64_t> lines;
  std::vector<float> x;
  int64_t fields_per_line = train ? train->cols + 1 : -1;
  size_t p = 0;
  int64_t line = 0;
  while (p < n) {
    ++line;
    size_t eol = text.find('\n', p);
    if (eol == std::string::npos) eol = n;
    const size_t line_start = p;
    p = eol + 1;
    size_t content_end = eol;
    while (content_end > line_start && (text[content_end - 1] == '\r' || text[content_end - 1] == ' ')) --content_end;
    if (content_end == line_start) continue;  // blank line
    std::vector<double> row;
    size_t f = line_start;
    bool header = false;
    for (;;) {
      size_t comma = text.find(',', f);
      if (comma == std::string::npos || comma > content_end) comma = content_end;
      double v = 0;
      if (!parse_number(base + f, base + comma, v)) {
        if (raw_labels.empty() && row.empty() && line == 1) {
          header = true;
          break;
        }
        DT_THROW(Corrupt, name << ": line " << line << ", byte offset " << f << ": field " << row.size() + 1 << " '"
                               << text.substr(f, std::min<size_t>(comma - f, 40)) << "' is not a number");
      }
      row.push_back(v);
      if (comma == content_end) break;
      f = comma + 1;
    }
    if (header) continue;
    if (fields_per_line < 0) fields_per_line = static_cast<int64_t>(row.size());
    DT_CHECK(static_cast<int64_t>(row.size()) == fields_per_line, Corrupt,
             name << ": line " << line << ", byte offset " << line_start << ": " << row.size() << " fields, expected "
                  << fields_per_line << (train ? " (the training file's label + features)" : " (as on the first data line)"));
    DT_CHECK(fields_per_line >= 2, Corrupt, name << ": line " << line << ": need a label and at least one feature");
    raw_labels.push_back(row[0]);
    lines.push_back(line);
    for (size_t j = 1; j < row.size(); ++j) x.push_back(static_cast<float>(row[j]));
  }
  DT_CHECK(!raw_labels.empty(), Corrupt, name << ": no examples (the file is empty)");
  Dataset ds;
  ds.source = base_name(name);
  ds.rows = static_cast<int64_t>(raw_labels.size());
  ds.cols = fields_per_line - 1;
  ds.dense = std::move(x);
  if (train) {
    ds.label_values = train->label_values;
  } else {
    ds.label_values = raw_labels;
    std::sort(ds.label_values.begin(), ds.label_values.end());
    ds.label_values.erase(std::unique(ds.label_values.begin(), ds.label_values.end()), ds.label_values.end());
  }
  ds.num_classes = static_cast<int>(ds.label_values.size());
  std::map<double, int32_t> cls;
  for (size_t c = 0; c < ds.label_values.size(); ++c) cls[ds.label_values[c]] = static_cast<int32_t>(c);
  for (size_t i = 0; i < raw_labels.size(); ++i) {
    auto it = cls.find(raw_labels[i]);
    DT_CHECK(it != cls.end(), Corrupt,
             name << ": line " << lines[i] << ": label " << raw_labels[i] << " does not occur in the training file");
    ds.labels.push_back(it->second);
  }
  return ds;
}

Dataset load_csv(const std::string& path) { return parse_csv(read_file(path), path); }
Dataset load_csv_test(const std::string& path, const Dataset& train) {
  return parse_csv(read_file(path), path, &train);
}

}  // namespace dtrain::data
