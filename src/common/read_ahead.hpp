// Reading a long run of memory in order at the speed the memory allows one core: call
// read_ahead(line) for each 64-byte line just before reading it (a streaming read, the FP8
// weight kernel). It asks for two lines further on, into L2:
//   - the line kLineAhead on, every time: lines the hardware prefetcher has not yet fetched;
//   - at the first line of each 4 KiB page, also the line kPageAhead on. The hardware prefetcher
//     follows a stream within a page, and starts on a page only once the reads reach it; touching
//     each page 4 pages early starts it there while the reads are still behind.
// Measured on the 2-core AMD EPYC Zen 5 VM (two processes at once, the variants alternating in
// each, medians of 6-8 runs against four interleaved streams with no prefetch, the best read
// before): one stream with both prefetches read 1.17-1.37x as fast; with the per-line one alone
// (6 or 12 KiB on) 0.83-0.85x; with the page one alone (two lines) 1.19x; two or four streams with
// both, 1.0-1.15x. The FP8 kernel's weights, read this way instead of one prefetch per line 12 KiB
// on, came 1.2-1.6x as fast out of cache (numeric/mx_matrix_avx512.cpp). A prefetch past the end of
// the memory never faults.
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
