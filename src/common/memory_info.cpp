#include "common/memory_info.hpp"

#include <sys/statvfs.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "common/bytes.hpp"

namespace shmoe {

std::uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return saturating_mul(static_cast<std::uint64_t>(pages), static_cast<std::uint64_t>(page));
}

std::optional<std::uint64_t> available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib) {
    std::getline(meminfo, unit);
    if (key == "MemAvailable:") return saturating_mul(kib, 1024);
  }
  return std::nullopt;
}

std::optional<FileSystemSpace> file_system_space(const char* path) {
  struct statvfs s {};
  if (::statvfs(path, &s) != 0) return std::nullopt;
  return FileSystemSpace{saturating_mul(s.f_bavail, s.f_frsize),
                         saturating_mul(s.f_blocks, s.f_frsize)};
}

}  // namespace shmoe
