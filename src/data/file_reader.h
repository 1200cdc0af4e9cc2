// data/file_reader.h — whole-file reads of plain or gzip-compressed files.
//
// Contract
// - read_file(path) returns the file's bytes, decompressing gzip transparently (zlib's gzread
//   passes plain files through), so every loader accepts "x" and "x.gz" alike.
// - A missing or unreadable file throws IoError naming the path and the OS reason; a damaged
//   or truncated gzip stream throws Corrupt naming the path and how many bytes decompressed
//   before the damage.
// - find_existing(candidates) returns the first path that exists, or "" when none does.
// Thread-safety: stateless.
#pragma once

#include <string>
#include <vector>

namespace dtrain::data {

std::string read_file(const std::string& path);
bool file_exists(const std::string& path);
std::string find_existing(const std::vector<std::string>& candidates);
// The last path component, for short messages ("a9a.t.gz").
std::string base_name(const std::string& path);

}  // namespace dtrain::data
