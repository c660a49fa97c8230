// A streaming read of a buffer, the limit of a computation that reads each byte once (weights of
// a decode-bound GEMM): what the benchmarks divide by. Reading, not copying: a copy also writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace shmoe {

// Reads bytes [0, bytes rounded down to 256) of p once, 64-byte vectors into four independent
// accumulators, and returns something of them so that the reads cannot be left out.
inline std::uint64_t stream_read(const std::byte* p, std::size_t bytes) {
  using V = std::uint64_t __attribute__((vector_size(64)));
  V a{}, b{}, c{}, d{};
  for (std::size_t i = 0; i + 256 <= bytes; i += 256) {
    V x[4];
    std::memcpy(x, p + i, sizeof x);
    a ^= x[0];
    b ^= x[1];
    c ^= x[2];
    d ^= x[3];
  }
  const V s = a ^ b ^ c ^ d;
  return s[0] ^ s[7];
}

}  // namespace shmoe
