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

// The lines are read as kStreams sequential streams, a quarter of the buffer each, one line from
// each in turn (then the last lines % kStreams in order): on the 2-core AMD EPYC VM one stream
// read 12-21 GB/s where four read 20-29 (two processes at once, 200 MB each on huge pages,
// alternating runs), as a core's prefetchers keep more lines coming for several streams than for
// one. Eight streams did no better, sixteen worse, and groups of four lines per stream worse
// than one. oneDNN's bf16 matmul on one row of a read its weights faster than the single stream.
constexpr std::size_t kStreams = 4;

// Named accumulators, one per stream: as an array GCC kept them on the stack (a store per load).
__attribute__((target("avx2"))) std::uint64_t read_avx2(const std::byte* p, std::size_t lines) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, b0 = a0, b1 = a0, c0 = a0, c1 = a0, d0 = a0,
          d1 = a0;
  const std::size_t part = lines / kStreams;
  const std::byte *pa = p, *pb = pa + part * kLine, *pc = pb + part * kLine,
                  *pd = pc + part * kLine;
  for (std::size_t i = 0; i < part * kLine; i += kLine) {
    const auto *qa = reinterpret_cast<const __m256i*>(pa + i),
               *qb = reinterpret_cast<const __m256i*>(pb + i),
               *qc = reinterpret_cast<const __m256i*>(pc + i),
               *qd = reinterpret_cast<const __m256i*>(pd + i);
    a0 = _mm256_xor_si256(a0, _mm256_loadu_si256(qa));
    a1 = _mm256_xor_si256(a1, _mm256_loadu_si256(qa + 1));
    b0 = _mm256_xor_si256(b0, _mm256_loadu_si256(qb));
    b1 = _mm256_xor_si256(b1, _mm256_loadu_si256(qb + 1));
    c0 = _mm256_xor_si256(c0, _mm256_loadu_si256(qc));
    c1 = _mm256_xor_si256(c1, _mm256_loadu_si256(qc + 1));
    d0 = _mm256_xor_si256(d0, _mm256_loadu_si256(qd));
    d1 = _mm256_xor_si256(d1, _mm256_loadu_si256(qd + 1));
  }
  for (std::size_t i = part * kStreams; i < lines; ++i) {
    const auto* q = reinterpret_cast<const __m256i*>(p + i * kLine);
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
  const std::size_t part = lines / kStreams;
  const std::byte *pa = p, *pb = pa + part * kLine, *pc = pb + part * kLine,
                  *pd = pc + part * kLine;
  for (std::size_t i = 0; i < part * kLine; i += kLine) {
    a = _mm512_xor_si512(a, _mm512_loadu_si512(pa + i));
    b = _mm512_xor_si512(b, _mm512_loadu_si512(pb + i));
    c = _mm512_xor_si512(c, _mm512_loadu_si512(pc + i));
    d = _mm512_xor_si512(d, _mm512_loadu_si512(pd + i));
  }
  for (std::size_t i = part * kStreams; i < lines; ++i)
    a = _mm512_xor_si512(a, _mm512_loadu_si512(p + i * kLine));
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
