// data/text.h — plain text as a sequence of character ids.
//
// Contract
// - load_text(path) reads any plain or gzipped file; `vocab` is the sorted set of distinct
//   bytes that occur, and ids[i] is the position of byte i of the file in `vocab`.
// - next_char_dataset(text, context, first, last) turns positions [first, last) into a
//   classification problem for the sparse models: example t predicts ids[t] from the
//   `context` characters before it, one-hot encoded (column k * |vocab| + id of the
//   character k+1 places back), so a softmax model becomes a character n-gram model.
// Thread-safety: stateless.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace dtrain::data {

struct TextData {
  std::string source;
  std::vector<uint8_t> vocab;
  std::vector<int32_t> ids;
};

TextData text_from_string(const std::string& bytes, const std::string& name);
TextData load_text(const std::string& path);
Dataset next_char_dataset(const TextData& text, int context, int64_t first, int64_t last);

}  // namespace dtrain::data
