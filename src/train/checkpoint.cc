#include "train/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace dtrain {
namespace {

constexpr char kMagic[8] = {'D', 'T', 'C', 'K', 'P', 'T', '0', '1'};
constexpr size_t kTrailer = 12;

template <class T>
void append(std::vector<uint8_t>& out, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.insert(out.end(), b, b + sizeof(T));
}

template <class T>
T read_at(std::span<const uint8_t> bytes, size_t at) {
  T v;
  std::memcpy(&v, bytes.data() + at, sizeof(T));
  return v;
}

uint32_t crc_of(const uint8_t* p, size_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (n > 0) {
    const auto step = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    crc = crc32(crc, p, step);
    p += step;
    n -= step;
  }
  return static_cast<uint32_t>(crc);
}

std::string dir_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

void write_all(int fd, const uint8_t* p, size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    DT_SYSCHECK(w < 0 ? -1 : 0, "writing checkpoint '" << path << "'");
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  for (const auto& [name, bytes] : sections_) out.push_back(name);
  return out;
}

void Checkpoint::put(const std::string& name, std::vector<uint8_t> bytes) { sections_[name] = std::move(bytes); }

void Checkpoint::put_floats(const std::string& name, std::span<const float> values) {
  std::vector<uint8_t> b(values.size_bytes());
  if (!b.empty()) std::memcpy(b.data(), values.data(), b.size());
  put(name, std::move(b));
}

void Checkpoint::put_u64s(const std::string& name, std::span<const uint64_t> values) {
  std::vector<uint8_t> b(values.size_bytes());
  if (!b.empty()) std::memcpy(b.data(), values.data(), b.size());
  put(name, std::move(b));
}

void Checkpoint::put_string(const std::string& name, const std::string& value) {
  put(name, std::vector<uint8_t>(value.begin(), value.end()));
}

const std::vector<uint8_t>& Checkpoint::get(const std::string& name) const {
  auto it = sections_.find(name);
  DT_CHECK(it != sections_.end(), Corrupt, source_ << " has no '" << name << "' section");
  return it->second;
}

std::vector<float> Checkpoint::get_floats(const std::string& name) const {
  const auto& b = get(name);
  DT_CHECK(b.size() % sizeof(float) == 0, Corrupt, source_ << ": section '" << name << "' is not a float array");
  std::vector<float> v(b.size() / sizeof(float));
  if (!b.empty()) std::memcpy(v.data(), b.data(), b.size());
  return v;
}

std::vector<uint64_t> Checkpoint::get_u64s(const std::string& name) const {
  const auto& b = get(name);
  DT_CHECK(b.size() % sizeof(uint64_t) == 0, Corrupt, source_ << ": section '" << name << "' is not a u64 array");
  std::vector<uint64_t> v(b.size() / sizeof(uint64_t));
  if (!b.empty()) std::memcpy(v.data(), b.data(), b.size());
  return v;
}

std::string Checkpoint::get_string(const std::string& name) const {
  const auto& b = get(name);
  return std::string(b.begin(), b.end());
}

std::vector<uint8_t> Checkpoint::serialize() const {
  std::vector<uint8_t> out(kMagic, kMagic + 8);
  append<uint32_t>(out, static_cast<uint32_t>(sections_.size()));
  for (const auto& [name, bytes] : sections_) {
    append<uint32_t>(out, static_cast<uint32_t>(name.size()));
    out.insert(out.end(), name.begin(), name.end());
    append<uint64_t>(out, bytes.size());
    out.insert(out.end(), bytes.begin(), bytes.end());
  }
  const uint64_t payload = out.size();
  const uint32_t crc = crc_of(out.data(), out.size());
  append<uint64_t>(out, payload);
  append<uint32_t>(out, crc);
  return out;
}

Checkpoint Checkpoint::parse(std::span<const uint8_t> bytes, const std::string& name) {
  Checkpoint ck;
  ck.source_ = "checkpoint '" + name + "'";
  const std::string& src = ck.source_;
  DT_CHECK(bytes.size() >= 8 && std::memcmp(bytes.data(), kMagic, 8) == 0, Corrupt,
           src << " is not a dtrain checkpoint (bad magic at byte offset 0)");
  DT_CHECK(bytes.size() >= 8 + 4 + kTrailer, Corrupt, src << " is truncated (" << bytes.size() << " bytes)");
  const size_t payload = bytes.size() - kTrailer;
  const auto stated = read_at<uint64_t>(bytes, payload);
  DT_CHECK(stated == payload, Corrupt,
           src << " is truncated or has trailing bytes: its trailer says " << stated << " payload bytes, the file has "
               << payload << " before the trailer");
  const auto crc = read_at<uint32_t>(bytes, payload + 8);
  DT_CHECK(crc == crc_of(bytes.data(), payload), Corrupt,
           src << " failed its CRC-32 check: the file is damaged; delete it or restart without --resume");
  size_t at = 8;
  const auto count = read_at<uint32_t>(bytes, at);
  at += 4;
  for (uint32_t i = 0; i < count; ++i) {
    DT_CHECK(at + 4 <= payload, Corrupt, src << ": section table overruns the file at byte offset " << at);
    const auto len = read_at<uint32_t>(bytes, at);
    at += 4;
    DT_CHECK(at + len + 8 <= payload, Corrupt, src << ": section name overruns the file at byte offset " << at);
    std::string sname(reinterpret_cast<const char*>(bytes.data() + at), len);
    at += len;
    const auto size = read_at<uint64_t>(bytes, at);
    at += 8;
    DT_CHECK(size <= payload - at, Corrupt, src << ": section '" << sname << "' overruns the file at byte offset " << at);
    ck.sections_[sname].assign(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                               bytes.begin() + static_cast<std::ptrdiff_t>(at + size));
    at += size;
  }
  DT_CHECK(at == payload, Corrupt, src << ": " << payload - at << " unexplained bytes at byte offset " << at);
  return ck;
}

void Checkpoint::save(const std::string& path) const {
  const std::vector<uint8_t> bytes = serialize();
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  DT_SYSCHECK(fd, "cannot create '" << tmp << "'");
  try {
    write_all(fd, bytes.data(), bytes.size(), tmp);
    DT_SYSCHECK(::fsync(fd), "fsync '" << tmp << "'");
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  DT_SYSCHECK(::close(fd), "close '" << tmp << "'");
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    DT_THROW(IoError, "cannot rename '" << tmp << "' to '" << path << "': " << errno_string(err));
  }
  const std::string dir = dir_of(path);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DT_SYSCHECK(dfd, "cannot open directory '" << dir << "' to fsync it");
  int rc = ::fsync(dfd);
  ::close(dfd);
  DT_SYSCHECK(rc, "fsync directory '" << dir << "'");
}

Checkpoint Checkpoint::load(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  DT_SYSCHECK(fd, "cannot open checkpoint '" << path << "'");
  std::vector<uint8_t> bytes;
  uint8_t buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      DT_THROW(IoError, "reading checkpoint '" << path << "': " << errno_string(err));
    }
    if (n == 0) break;
    bytes.insert(bytes.end(), buf, buf + n);
  }
  ::close(fd);
  return parse(bytes, path);
}

}  // namespace dtrain
