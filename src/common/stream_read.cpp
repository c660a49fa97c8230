#include "common/stream_read.hpp"

#include <cstring>

#include "common/cpu_features.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SHMOE_STREAM_READ_X86 1
#endif

namespace shmoe {
namespace {

constexpr std::size_t kLine = 64;

std::uint64_t read_portable(const std::byte* p, std::size_t lines) {
  std::uint64_t acc[8] = {};
  for (std::size_t i = 0; i < lines; ++i) {
    std::uint64_t w[8];
    std::memcpy(w, p + i * kLine, sizeof w);
    for (int j = 0; j < 8; ++j) acc[j] ^= w[j];
  }
  std::uint64_t r = 0;
  for (const auto a : acc) r ^= a;
  return r;
}

#ifdef SHMOE_STREAM_READ_X86

// Four independent accumulators per kernel, four lines per step: enough loads in flight.
__attribute__((target("avx2"))) std::uint64_t read_avx2(const std::byte* p, std::size_t lines) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  std::size_t i = 0;
  for (; i + 4 <= lines; i += 4) {
    const auto* q = reinterpret_cast<const __m256i*>(p + i * kLine);
    a = _mm256_xor_si256(a, _mm256_loadu_si256(q + 0));
    b = _mm256_xor_si256(b, _mm256_loadu_si256(q + 1));
    c = _mm256_xor_si256(c, _mm256_loadu_si256(q + 2));
    d = _mm256_xor_si256(d, _mm256_loadu_si256(q + 3));
    a = _mm256_xor_si256(a, _mm256_loadu_si256(q + 4));
    b = _mm256_xor_si256(b, _mm256_loadu_si256(q + 5));
    c = _mm256_xor_si256(c, _mm256_loadu_si256(q + 6));
    d = _mm256_xor_si256(d, _mm256_loadu_si256(q + 7));
  }
  for (; i < lines; ++i) {
    const auto* q = reinterpret_cast<const __m256i*>(p + i * kLine);
    a = _mm256_xor_si256(a, _mm256_loadu_si256(q + 0));
    b = _mm256_xor_si256(b, _mm256_loadu_si256(q + 1));
  }
  const __m256i s = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
  const __m128i h = _mm_xor_si128(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  return static_cast<std::uint64_t>(_mm_cvtsi128_si64(h) ^ _mm_extract_epi64(h, 1));
}

__attribute__((target("avx512f"))) std::uint64_t read_avx512(const std::byte* p,
                                                             std::size_t lines) {
  __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
  std::size_t i = 0;
  for (; i + 4 <= lines; i += 4) {
    const std::byte* q = p + i * kLine;
    a = _mm512_xor_si512(a, _mm512_loadu_si512(q));
    b = _mm512_xor_si512(b, _mm512_loadu_si512(q + kLine));
    c = _mm512_xor_si512(c, _mm512_loadu_si512(q + 2 * kLine));
    d = _mm512_xor_si512(d, _mm512_loadu_si512(q + 3 * kLine));
  }
  for (; i < lines; ++i) a = _mm512_xor_si512(a, _mm512_loadu_si512(p + i * kLine));
  const __m512i s = _mm512_xor_si512(_mm512_xor_si512(a, b), _mm512_xor_si512(c, d));
  alignas(64) std::uint64_t w[8];
  _mm512_store_si512(w, s);
  std::uint64_t r = 0;
  for (const auto x : w) r ^= x;
  return r;
}

#endif  // SHMOE_STREAM_READ_X86

}  // namespace

bool stream_read_available(StreamReadKernel k) {
  switch (k) {
    case StreamReadKernel::kAvx2:
      return cpu_has_avx2();
    case StreamReadKernel::kAvx512:
      return cpu_has_avx512f();
    default:
      return true;
  }
}

std::uint64_t stream_read(const std::byte* p, std::size_t bytes, StreamReadKernel k) {
  const std::size_t lines = bytes / kLine;
#ifdef SHMOE_STREAM_READ_X86
  const bool any = k == StreamReadKernel::kAuto;
  if ((any || k == StreamReadKernel::kAvx512) && cpu_has_avx512f()) return read_avx512(p, lines);
  if (k != StreamReadKernel::kPortable && cpu_has_avx2()) return read_avx2(p, lines);
#else
  (void)k;
#endif
  return read_portable(p, lines);
}

}  // namespace shmoe
