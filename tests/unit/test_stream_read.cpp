// common/stream_read: every kernel the CPU has reads every 8-byte word of the whole 64-byte lines
// in the buffer, at any alignment, and nothing past them (the XOR it returns against a scalar
// XOR of the same words, on fresh random bytes).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/stream_read.hpp"

namespace shmoe {
namespace {

std::uint64_t xor_of_words(const std::byte* p, std::size_t bytes) {
  std::uint64_t r = 0;
  for (std::size_t i = 0; i + 8 <= bytes / 64 * 64; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    r ^= w;
  }
  return r;
}

const StreamReadKernel kKernels[] = {StreamReadKernel::kAuto, StreamReadKernel::kPortable,
                                     StreamReadKernel::kAvx2, StreamReadKernel::kAvx512};

TEST(StreamRead, EveryKernelReadsEveryWholeLineAndNothingMore) {
  std::mt19937_64 rng(std::random_device{}());
  std::vector<std::uint64_t> words(70'000);
  for (auto& w : words) w = rng();
  const auto* base = reinterpret_cast<const std::byte*>(words.data());
  const std::size_t sizes[] = {0,   8,    63,   64,   65,          200,    256,
                               320, 1000, 4096, 4160, 65536 + 192, 500'000};
  for (const auto k : kKernels) {
    if (!stream_read_available(k)) continue;
    for (const std::size_t offset : {0, 1, 8, 32, 63}) {
      for (const auto bytes : sizes) {
        ASSERT_EQ(stream_read(base + offset, bytes, k), xor_of_words(base + offset, bytes))
            << "kernel " << static_cast<int>(k) << ", offset " << offset << ", bytes " << bytes;
      }
    }
  }
}

TEST(StreamRead, AChangedWordInAnyLineChangesTheResult) {
  std::mt19937_64 rng(std::random_device{}());
  std::vector<std::uint64_t> words(64 * 8);  // 64 lines
  for (auto& w : words) w = rng();
  const auto* p = reinterpret_cast<const std::byte*>(words.data());
  const std::size_t bytes = words.size() * 8;
  for (const auto k : kKernels) {
    if (!stream_read_available(k)) continue;
    const std::uint64_t before = stream_read(p, bytes, k);
    for (std::size_t i = 0; i < words.size(); ++i) {
      const std::uint64_t flip = std::uint64_t{1} << (rng() % 64);
      words[i] ^= flip;
      EXPECT_EQ(stream_read(p, bytes, k), before ^ flip) << "word " << i;
      words[i] ^= flip;
    }
  }
}

}  // namespace
}  // namespace shmoe
