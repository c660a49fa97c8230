#include "common/bytes.hpp"

#include <fmt/format.h>

namespace shmoe {

std::string human_bytes(std::uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (value >= 1024 && u < 5) {
    value /= 1024;
    ++u;
  }
  return fmt::format("{:.1f} {}", value, units[u]);
}

}  // namespace shmoe
