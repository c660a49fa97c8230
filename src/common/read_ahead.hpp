// Reading a long run of memory in order at the speed the memory allows one core: call
// read_ahead(line) for each 64-byte line just before reading it (a streaming read, the FP8
// weight kernel). It asks for two lines further on, into L2:
//   - the line kLineAhead on, every time: lines the hardware prefetcher has not yet fetched;
//   - at the first line of each 4 KiB page, also the line kPageAhead on. The hardware prefetcher
//     follows a stream within a page, and starts on a page only once the reads reach it; touching
//     each page 4 pages early starts it there while the reads are still behind.
// Both together read faster than either alone or than several interleaved streams, and feed the
// FP8 kernel's weights at the read's speed (docs/performance/2026-12-05-mx-kernel.md). A prefetch
// past the end of the memory never faults.
#pragma once

#include <cstddef>
#include <cstdint>

namespace shmoe {

inline constexpr std::size_t kLineAhead = 6144, kPageAhead = 16384;

inline void read_ahead(const std::byte* line) {
  __builtin_prefetch(line + kLineAhead, 0, 2);
  // The first line that starts in a page (< 64, not == 0: lines need not be 64-byte aligned).
  if ((reinterpret_cast<std::uintptr_t>(line) & 4095) < 64)
    __builtin_prefetch(line + kPageAhead, 0, 2);
}

}  // namespace shmoe
