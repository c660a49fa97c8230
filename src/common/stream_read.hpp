// A streaming read of a buffer, the limit of a computation that reads each byte once (weights of
// a decode-bound GEMM): what the benchmarks divide by. Reading, not copying: a copy also writes.
// A limit must be the fastest read the core can do, so it uses the widest loads the CPU has: the
// compiler's own code for a 64-byte vector type spilled each load to the stack (a copy), and read
// at 26 GB/s where AVX-512 loads read 51 (one thread, 80 MiB on huge pages, AMD EPYC Zen 5 VM);
// and it prefetches ahead (common/read_ahead.hpp), as the FP8 weight kernel does: without, the
// kernel read its weights faster than the limit.
// Read buffers on huge pages (common/huge_pages.hpp), as the FP8 weights are: on 4 KiB pages the
// same loop lost 5-15%.
#pragma once

#include <cstddef>
#include <cstdint>

namespace shmoe {

// kAuto: the widest the CPU has; one it lacks: the next narrower.
enum class StreamReadKernel : std::uint8_t { kAuto, kPortable, kAvx2, kAvx512 };
bool stream_read_available(StreamReadKernel k);

// Reads bytes [0, bytes rounded down to 64) of p once and returns the XOR of their 8-byte words
// (so that the reads cannot be left out), the same whichever kernel reads them.
std::uint64_t stream_read(const std::byte* p, std::size_t bytes,
                          StreamReadKernel k = StreamReadKernel::kAuto);

}  // namespace shmoe
