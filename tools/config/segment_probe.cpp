// For shmoe-config's tests: starts as a PE and prints the bytes its symmetric heap segment maps
// (the /dev/shm object /shmoe-PID-RANK, as /proc/self/maps lists it), so a test can compare what
// --diagnose plans for with what shmem_init maps.
#include <fmt/format.h>
#include <shmem.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

int main() {
  shmem_init();
  const std::string segment = fmt::format("/dev/shm/shmoe-{}-{}", ::getpid(), shmem_my_pe());
  std::ifstream maps("/proc/self/maps");
  std::uint64_t bytes = 0;
  for (std::string line; std::getline(maps, line);) {
    // "start-end perms offset dev inode path", the path followed by " (deleted)" once unlinked.
    const auto at = line.find(segment);
    if (at == std::string::npos) continue;
    const std::string rest = line.substr(at + segment.size());
    if (!rest.empty() && rest != " (deleted)") continue;  // the -data segment, or another PE's
    const auto dash = line.find('-');
    const auto space = line.find(' ');
    bytes += std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16) -
             std::stoull(line.substr(0, dash), nullptr, 16);
  }
  fmt::print("{}\n", bytes);
  shmem_finalize();
  return bytes > 0 ? 0 : 1;
}
