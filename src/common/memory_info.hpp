// What this machine has: its memory, what of it is available now, and the free space of a file
// system (/dev/shm, where symmetric heaps live). Read when a job is admitted, before anything
// large is allocated.
#pragma once

#include <cstdint>
#include <optional>

namespace shmoe {

inline constexpr const char* kShmDir = "/dev/shm";

// Physical memory (every page the kernel manages).
std::uint64_t physical_memory_bytes();

// MemAvailable of /proc/meminfo: what can be allocated now without swapping; nullopt when the
// kernel does not say.
std::optional<std::uint64_t> available_memory_bytes();

struct FileSystemSpace {
  std::uint64_t free = 0;  // what an unprivileged process can still allocate there
  std::uint64_t total = 0;
};
std::optional<FileSystemSpace> file_system_space(const char* path);

}  // namespace shmoe
