// train/checkpoint.h — named binary sections in one file, written atomically, checksummed.
//
// File layout (little-endian):
//   "DTCKPT01"                      8-byte magic (the digits are the format version)
//   u32 section count
//   per section: u32 name length, name bytes, u64 size, size bytes
//   u64 payload length              bytes from the magic through the last section
//   u32 CRC-32 (zlib) of the payload
// The trailer is last, so a file cut anywhere fails the length or CRC check.
//
// Contract
// - save(path) writes "<path>.tmp.<pid>" in the same directory, fsyncs it, renames it over
//   `path` and fsyncs the directory: a crash leaves either the old complete file or the new
//   one, never a torn file under `path`.
// - load(path) refuses a missing file (IoError), a wrong magic, a truncated file, a CRC
//   mismatch or a malformed section table (Corrupt), each message naming the file.
// - get*(name) throws Corrupt naming the file and the missing section.
// Thread-safety: a value type; save/load do blocking I/O on the calling thread.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace dtrain {

class Checkpoint {
 public:
  void put(const std::string& name, std::vector<uint8_t> bytes);
  void put_floats(const std::string& name, std::span<const float> values);
  void put_u64s(const std::string& name, std::span<const uint64_t> values);
  void put_string(const std::string& name, const std::string& value);

  bool has(const std::string& name) const { return sections_.count(name) != 0; }
  std::vector<std::string> names() const;
  const std::vector<uint8_t>& get(const std::string& name) const;
  std::vector<float> get_floats(const std::string& name) const;
  std::vector<uint64_t> get_u64s(const std::string& name) const;
  std::string get_string(const std::string& name) const;

  std::vector<uint8_t> serialize() const;
  static Checkpoint parse(std::span<const uint8_t> bytes, const std::string& name);

  void save(const std::string& path) const;
  static Checkpoint load(const std::string& path);

 private:
  std::string source_ = "checkpoint";
  std::map<std::string, std::vector<uint8_t>> sections_;
};

}  // namespace dtrain
