// bf16 and fp16 conversions against independent references: the compiler's own _Float16 for
// fp16 (all 65536 codes decoded, millions of floats encoded) and a nearest-of-neighbours search
// in double precision for bf16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <vector>

#include "numeric/half.hpp"

namespace shmoe::numeric {
namespace {

float bits_to_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(Fp16, DecodesEveryCodeLikeTheCompiler) {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    _Float16 h;
    std::uint16_t code = static_cast<std::uint16_t>(b);
    std::memcpy(&h, &code, 2);
    const float want = static_cast<float>(h), got = fp16_to_float({code});
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << b;
    } else {
      ASSERT_EQ(std::memcmp(&want, &got, 4), 0) << std::hex << b << " " << got << " vs " << want;
    }
  }
}

TEST(Fp16, EncodesLikeTheCompilerOnRandomAndEdgeFloats) {
  std::mt19937_64 rng(std::random_device{}());
  auto check = [](float f) {
    const _Float16 h = static_cast<_Float16>(f);
    std::uint16_t want;
    std::memcpy(&want, &h, 2);
    const std::uint16_t got = float_to_fp16(f).bits;
    if (std::isnan(f)) {
      ASSERT_EQ(got & 0x7c00, 0x7c00);
      ASSERT_NE(got & 0x3ff, 0);
    } else {
      ASSERT_EQ(got, want) << std::hexfloat << f;
    }
  };
  for (float f : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 6.1e-5f, 5.96e-8f, 2.98e-8f, 2.99e-8f,
                  INFINITY, -INFINITY, NAN}) {
    check(f);
  }
  for (int i = 0; i < 3000000; ++i) {
    const std::uint32_t u = static_cast<std::uint32_t>(rng());
    float f = bits_to_float(u);
    if (i % 3 == 1) f = std::ldexp(static_cast<float>(u % 100000) / 1000.0f, -20 + (i % 40));
    check(f);
  }
}

// The bf16 neighbours of f, and the one nearest in double arithmetic (ties to the even code).
std::uint16_t nearest_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  const std::uint16_t lo = static_cast<std::uint16_t>(u >> 16);
  const std::uint16_t hi = static_cast<std::uint16_t>(lo + 1);
  const double dl = std::fabs(static_cast<double>(bf16_to_float({lo})) - f);
  // Past the largest finite value the next step is 2^128, where rounding turns into infinity.
  const double hi_value = (hi & 0x7fff) == 0x7f80 ? std::copysign(0x1p128, f)
                                                  : static_cast<double>(bf16_to_float({hi}));
  const double dh = std::fabs(hi_value - f);
  if (dl < dh) return lo;
  if (dh < dl) return hi;
  return (lo & 1) == 0 ? lo : hi;
}

TEST(Bf16, RoundsToNearestEvenAndKeepsNaN) {
  std::mt19937_64 rng(std::random_device{}());
  for (int i = 0; i < 3000000; ++i) {
    const std::uint32_t u = static_cast<std::uint32_t>(rng());
    const float f = bits_to_float(u);
    const std::uint16_t got = float_to_bf16(f).bits;
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(bf16_to_float({got}))) << std::hex << u;
      continue;
    }
    if (std::isinf(f) || (u & 0x7f800000u) == 0x7f800000u) continue;
    // Values that round beyond the largest finite bf16 become infinity.
    const std::uint16_t want = nearest_bf16(f);
    if ((want & 0x7f80) == 0x7f80) {
      ASSERT_EQ(got & 0x7fff, 0x7f80) << std::hexfloat << f;
    } else {
      ASSERT_EQ(got, want) << std::hexfloat << f;
    }
  }
  EXPECT_EQ(float_to_bf16(1.0f).bits, 0x3f80);
  EXPECT_EQ(bf16_to_float({0x3f80}), 1.0f);
}

// The array forms (AVX512-BF16's conversion 32 at a time where the CPU has it, with AVX2's code for
// a group holding a NaN or an fp32 subnormal; AVX2 16 at a time; then a scalar tail; the streamed
// one with non-temporal stores where the output is 32-byte aligned) give float_to_bf16's bits for
// every input, NaNs and every length's tail included, at aligned and unaligned outputs. Random
// bits make a NaN or a subnormal in about a fifth of the groups of 32, so both paths run.
TEST(Bf16, ArrayConversionsMatchTheScalarOne) {
  std::mt19937_64 rng(std::random_device{}());
  std::vector<float> x(1 << 16);
  for (auto& v : x) v = bits_to_float(static_cast<std::uint32_t>(rng()));
  const float specials[] = {0.0f, -0.0f, INFINITY,  -INFINITY,
                            NAN,  -NAN,  0x1p-149f, 0x1.fffffep127f};
  std::copy(std::begin(specials), std::end(specials), x.begin());
  using Convert = void (*)(const float*, std::size_t, std::uint16_t*);
  for (const Convert convert : {&floats_to_bf16, &floats_to_bf16_streamed}) {
    for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {  // in elements from 32 bytes
      for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{16},
                            std::size_t{17}, x.size()}) {
        std::vector<std::uint16_t> buffer(n + offset + 32, 0xabcd);
        const auto base = reinterpret_cast<std::uintptr_t>(buffer.data());
        std::uint16_t* got = buffer.data() + (32 - base % 32) / 2 + offset;
        convert(x.data(), n, got);
        for (std::size_t i = 0; i < n; ++i)
          ASSERT_EQ(got[i], float_to_bf16(x[i]).bits)
              << "n=" << n << " offset=" << offset << " i=" << i << std::hexfloat << " x=" << x[i];
        EXPECT_EQ(got[n], 0xabcd) << "wrote past n=" << n;
      }
    }
  }
}

}  // namespace
}  // namespace shmoe::numeric
