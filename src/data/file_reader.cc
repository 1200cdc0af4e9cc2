#include "data/file_reader.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace dtrain::data {

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string find_existing(const std::vector<std::string>& candidates) {
  for (const auto& c : candidates)
    if (file_exists(c)) return c;
  return "";
}

std::string base_name(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Reads in 1 MiB steps. gzread returns -1 on a damaged stream; a stream cut short is reported
// by gzerror as Z_BUF_ERROR ("unexpected end of file") after the last full read.
std::string read_file(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    int err = errno;
    DT_THROW(IoError, "cannot open '" << path << "': " << errno_string(err));
  }
  DT_CHECK(S_ISREG(st.st_mode), IoError, "'" << path << "' is not a regular file");
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    int err = errno;
    DT_THROW(IoError, "cannot open '" << path << "': " << errno_string(err));
  }
  gzbuffer(f, 1 << 20);
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  constexpr unsigned kStep = 1u << 20;
  for (;;) {
    size_t old = out.size();
    out.resize(old + kStep);
    int n = gzread(f, out.data() + old, kStep);
    if (n < 0) {
      int code = 0;
      std::string msg = gzerror(f, &code);
      out.resize(old);
      gzclose(f);
      DT_THROW(Corrupt, "'" << path << "': damaged gzip stream after " << old
                            << " decompressed bytes: " << msg);
    }
    out.resize(old + static_cast<size_t>(n));
    if (n == 0) break;
  }
  int code = Z_OK;
  std::string msg = gzerror(f, &code);
  gzclose(f);
  if (code != Z_OK && code != Z_STREAM_END) {
    DT_THROW(Corrupt, "'" << path << "': truncated or damaged gzip stream after " << out.size()
                          << " decompressed bytes: " << msg);
  }
  return out;
}

}  // namespace dtrain::data
