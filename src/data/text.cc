#include "data/text.h"

#include <array>

#include "base/error.h"
#include "data/file_reader.h"

namespace dtrain::data {

TextData text_from_string(const std::string& bytes, const std::string& name) {
  DT_CHECK(!bytes.empty(), Corrupt, name << ": the text file is empty");
  std::array<int32_t, 256> id;
  id.fill(-1);
  for (unsigned char c : bytes) id[c] = 0;
  TextData t;
  t.source = base_name(name);
  for (int c = 0; c < 256; ++c)
    if (id[c] == 0) {
      id[c] = static_cast<int32_t>(t.vocab.size());
      t.vocab.push_back(static_cast<uint8_t>(c));
    }
  t.ids.reserve(bytes.size());
  for (unsigned char c : bytes) t.ids.push_back(id[c]);
  return t;
}

TextData load_text(const std::string& path) { return text_from_string(read_file(path), path); }

Dataset next_char_dataset(const TextData& text, int context, int64_t first, int64_t last) {
  DT_CHECK(context >= 1, InvalidArgument, "the character context must be >= 1, got " << context);
  const int64_t n = static_cast<int64_t>(text.ids.size());
  first = std::max<int64_t>(first, context);
  DT_CHECK(0 <= first && first <= last && last <= n, InvalidArgument,
           text.source << ": position range [" << first << ", " << last << ") is outside the text of " << n << " characters");
  const int32_t v = static_cast<int32_t>(text.vocab.size());
  Dataset ds;
  ds.source = text.source;
  ds.sparse = true;
  ds.rows = last - first;
  ds.cols = int64_t{context} * v;
  ds.num_classes = v;
  for (int32_t c = 0; c < v; ++c) ds.label_values.push_back(text.vocab[static_cast<size_t>(c)]);
  ds.row_ptr.reserve(static_cast<size_t>(ds.rows + 1));
  ds.row_ptr.push_back(0);
  for (int64_t t = first; t < last; ++t) {
    for (int k = 0; k < context; ++k) {
      ds.col_idx.push_back(k * v + text.ids[static_cast<size_t>(t - 1 - k)]);
      ds.values.push_back(1.0f);
    }
    ds.labels.push_back(text.ids[static_cast<size_t>(t)]);
    ds.row_ptr.push_back(static_cast<int64_t>(ds.col_idx.size()));
  }
  return ds;
}

}  // namespace dtrain::data
