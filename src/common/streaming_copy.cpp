#include "common/streaming_copy.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace shmoe {

void copy_non_temporal(void* dst, const void* src, std::size_t bytes) {
#if defined(__x86_64__)
  auto* to = static_cast<std::byte*>(dst);
  const auto* from = static_cast<const std::byte*>(src);
  // Streaming stores need 16-byte aligned destinations; the loads may be unaligned.
  const std::size_t head =
      std::min(bytes, (16 - (reinterpret_cast<std::uintptr_t>(to) & 15)) & std::size_t{15});
  std::memcpy(to, from, head);
  std::size_t done = head;
  for (; done + 64 <= bytes; done += 64) {
    auto* d = reinterpret_cast<__m128i*>(to + done);
    const auto* f = reinterpret_cast<const __m128i*>(from + done);
    const __m128i a = _mm_loadu_si128(f), b = _mm_loadu_si128(f + 1), c = _mm_loadu_si128(f + 2),
                  e = _mm_loadu_si128(f + 3);
    _mm_stream_si128(d, a);
    _mm_stream_si128(d + 1, b);
    _mm_stream_si128(d + 2, c);
    _mm_stream_si128(d + 3, e);
  }
  std::memcpy(to + done, from + done, bytes - done);
#else
  std::memcpy(dst, src, bytes);
#endif
}

void fence_non_temporal() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

}  // namespace shmoe
