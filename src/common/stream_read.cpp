#include "common/stream_read.hpp"

#include <cstring>

#include "common/cpu_features.hpp"
#include "common/read_ahead.hpp"

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
    read_ahead(p + i * kLine);
    std::memcpy(w, p + i * kLine, sizeof w);
    for (int j = 0; j < 8; ++j) acc[j] ^= w[j];
  }
  std::uint64_t r = 0;
  for (const auto a : acc) r ^= a;
  return r;
}

#ifdef SHMOE_STREAM_READ_X86

// One stream, in order, each line after read_ahead (common/read_ahead.hpp says why: four
// interleaved streams, the best read without it, were 1.17-1.37x slower). Four lines per step
// into named accumulators, so that no XOR waits on the one before and nothing goes to the stack
// (as an array GCC kept them there: a store per load).
__attribute__((target("avx2"))) std::uint64_t read_avx2(const std::byte* p, std::size_t lines) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, b0 = a0, b1 = a0, c0 = a0, c1 = a0, d0 = a0,
          d1 = a0;
  const auto line = [p](std::size_t i) {
    read_ahead(p + i * kLine);
    return reinterpret_cast<const __m256i*>(p + i * kLine);
  };
  std::size_t i = 0;
  for (; i + 4 <= lines; i += 4) {
    const __m256i *qa = line(i), *qb = line(i + 1), *qc = line(i + 2), *qd = line(i + 3);
    a0 = _mm256_xor_si256(a0, _mm256_loadu_si256(qa));
    a1 = _mm256_xor_si256(a1, _mm256_loadu_si256(qa + 1));
    b0 = _mm256_xor_si256(b0, _mm256_loadu_si256(qb));
    b1 = _mm256_xor_si256(b1, _mm256_loadu_si256(qb + 1));
    c0 = _mm256_xor_si256(c0, _mm256_loadu_si256(qc));
    c1 = _mm256_xor_si256(c1, _mm256_loadu_si256(qc + 1));
    d0 = _mm256_xor_si256(d0, _mm256_loadu_si256(qd));
    d1 = _mm256_xor_si256(d1, _mm256_loadu_si256(qd + 1));
  }
  for (; i < lines; ++i) {
    const __m256i* q = line(i);
    a0 = _mm256_xor_si256(a0, _mm256_loadu_si256(q));
    a1 = _mm256_xor_si256(a1, _mm256_loadu_si256(q + 1));
  }
  const __m256i s =
      _mm256_xor_si256(_mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(b0, b1)),
                       _mm256_xor_si256(_mm256_xor_si256(c0, c1), _mm256_xor_si256(d0, d1)));
  const __m128i h = _mm_xor_si128(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  return static_cast<std::uint64_t>(_mm_cvtsi128_si64(h) ^ _mm_extract_epi64(h, 1));
}

__attribute__((target("avx512f"))) std::uint64_t read_avx512(const std::byte* p,
                                                             std::size_t lines) {
  __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
  // (A lambda returning the loaded vector would not get this function's target.)
  const auto line = [p](std::size_t i) {
    read_ahead(p + i * kLine);
    return p + i * kLine;
  };
  std::size_t i = 0;
  for (; i + 4 <= lines; i += 4) {
    a = _mm512_xor_si512(a, _mm512_loadu_si512(line(i)));
    b = _mm512_xor_si512(b, _mm512_loadu_si512(line(i + 1)));
    c = _mm512_xor_si512(c, _mm512_loadu_si512(line(i + 2)));
    d = _mm512_xor_si512(d, _mm512_loadu_si512(line(i + 3)));
  }
  for (; i < lines; ++i) a = _mm512_xor_si512(a, _mm512_loadu_si512(line(i)));
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
