#include "common/output_path.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace shmoe {
namespace fs = std::filesystem;

namespace {

std::string refuse(std::string_view option, const std::string& path, const std::string& why) {
  return fmt::format("{}={}: {}", option, path, why);
}

// The reason open(2) gave, with the directory named when it is the one missing.
std::string open_failure(const std::string& path, int err) {
  const fs::path parent = fs::path(path).parent_path();
  std::error_code ec;
  if (err == ENOENT && !parent.empty() && !fs::exists(parent, ec)) {
    return fmt::format("the directory {} does not exist", parent.string());
  }
  return std::strerror(err);
}

}  // namespace

// Access checks say little for root (who may write anywhere except where the file system
// refuses, such as /proc): opening the file is the only sure test. A file this creates is
// removed again.
std::string why_not_writable_file(std::string_view option, const std::string& path) {
  if (path.empty()) return refuse(option, path, "the path is empty");
  std::error_code ec;
  if (fs::is_directory(path, ec)) return refuse(option, path, "it is a directory, not a file");
  const bool existed = fs::exists(path, ec);
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    return refuse(option, path, "cannot write it: " + open_failure(path, err));
  }
  ::close(fd);
  if (!existed) ::unlink(path.c_str());
  return {};
}

std::string why_not_writable_directory(std::string_view option, const std::string& dir) {
  if (dir.empty()) return refuse(option, dir, "the path is empty");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return refuse(option, dir, fmt::format("cannot create the directory: {}", ec.message()));
  std::string probe = (fs::path(dir) / ".shmoe-write-test-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    return refuse(option, dir, fmt::format("cannot create files in it: {}", std::strerror(errno)));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return {};
}

}  // namespace shmoe
