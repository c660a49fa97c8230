// FP8 E4M3 / E5M2 conversions against references that share no code with the library: every code
// decoded from the OCP definition in double, and encoding compared with a brute-force search for
// the nearest finite value (ties to the even code) over millions of random and hand-picked floats.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "numeric/fp8.hpp"

namespace shmoe::numeric {
namespace {

constexpr Fp8Format kFormats[] = {Fp8Format::kE4M3, Fp8Format::kE5M2};

// Compile-time spot checks: the conversions are constexpr.
static_assert(encode_fp8(448.0f, Fp8Format::kE4M3) == 0x7e);
static_assert(encode_fp8(-57344.0f, Fp8Format::kE5M2) == 0xfb);
static_assert(decode_fp8(0x01, Fp8Format::kE4M3) == 0x1p-9f);
static_assert(decode_fp8(0x01, Fp8Format::kE5M2) == 0x1p-16f);

std::string name(Fp8Format f) {
  return f == Fp8Format::kE4M3 ? "E4M3" : "E5M2";
}

// The formats written out again from the OCP OFP8 text rather than taken from fp8_spec.
struct Layout {
  int mant_bits;
  int bias;
  bool has_inf;  // E5M2: exponent all ones is inf (mantissa 0) or NaN; E4M3: only S.1111.111 NaN
};

Layout layout(Fp8Format f) {
  return f == Fp8Format::kE4M3 ? Layout{3, 7, false} : Layout{2, 15, true};
}

enum class Kind { kFinite, kInf, kNaN };

// Value of a code by the definition, in double.
std::pair<Kind, double> reference(unsigned code, Fp8Format f) {
  const Layout l = layout(f);
  const int exp_bits = 7 - l.mant_bits;
  const int e = (code >> l.mant_bits) & ((1 << exp_bits) - 1);
  const int m = code & ((1 << l.mant_bits) - 1);
  const double sign = (code & 0x80) ? -1.0 : 1.0;
  const int e_all_ones = (1 << exp_bits) - 1;
  if (l.has_inf && e == e_all_ones) {
    return m == 0 ? std::pair{Kind::kInf, sign * HUGE_VAL} : std::pair{Kind::kNaN, 0.0};
  }
  if (!l.has_inf && e == e_all_ones && m == (1 << l.mant_bits) - 1) return {Kind::kNaN, 0.0};
  const double frac = static_cast<double>(m) / (1 << l.mant_bits);
  if (e == 0) return {Kind::kFinite, sign * std::ldexp(frac, 1 - l.bias)};
  return {Kind::kFinite, sign * std::ldexp(1.0 + frac, e - l.bias)};
}

TEST(Fp8, DecodesEveryCodeLikeTheDefinition) {
  for (Fp8Format f : kFormats) {
    int nans = 0;
    for (unsigned c = 0; c < 256; ++c) {
      const auto [kind, want] = reference(c, f);
      const auto code = static_cast<std::uint8_t>(c);
      const float got = decode_fp8(code, f);
      ASSERT_EQ(fp8_is_nan(code, f), kind == Kind::kNaN) << name(f) << std::hex << " " << c;
      if (kind == Kind::kNaN) {
        ++nans;
        ASSERT_TRUE(std::isnan(got)) << name(f) << std::hex << " " << c;
        ASSERT_EQ(std::signbit(got), (c & 0x80) != 0) << name(f) << std::hex << " " << c;
      } else {
        ASSERT_EQ(static_cast<double>(got), want) << name(f) << std::hex << " " << c;
        ASSERT_EQ(std::signbit(got), (c & 0x80) != 0) << name(f) << std::hex << " " << c;
      }
      // The table is the same function, bit for bit (NaNs included).
      ASSERT_EQ(std::bit_cast<std::uint32_t>(fp8_decode_table(f)[c]),
                std::bit_cast<std::uint32_t>(got))
          << name(f) << " " << c;
    }
    EXPECT_EQ(nans, f == Fp8Format::kE4M3 ? 2 : 6) << name(f);
  }
  EXPECT_EQ(decode_fp8(0x7e, Fp8Format::kE4M3), 448.0f);
  EXPECT_EQ(decode_fp8(0x08, Fp8Format::kE4M3), 0x1p-6f);
  EXPECT_EQ(decode_fp8(0x7b, Fp8Format::kE5M2), 57344.0f);
  EXPECT_EQ(decode_fp8(0xfc, Fp8Format::kE5M2), -INFINITY);
}

// Nearest finite code by exhaustive search over all non-negative finite codes, from the
// definition. Equal distance goes to the code with an even mantissa LSB, which is the code's LSB.
class Oracle {
 public:
  explicit Oracle(Fp8Format f) : f_(f) {
    for (unsigned c = 0; c < 0x80; ++c) {
      const auto [kind, v] = reference(c, f);
      if (kind == Kind::kFinite) values_.push_back({v, static_cast<std::uint8_t>(c)});
    }
  }

  std::uint8_t expected(float x) const {
    const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
    if (std::isnan(x)) return sign | (f_ == Fp8Format::kE4M3 ? 0x7f : 0x7e);
    // Documented choice: E4M3 saturates infinity like any other overflow.
    if (std::isinf(x)) return sign | (f_ == Fp8Format::kE4M3 ? 0x7e : 0x7c);
    // Saturation. (Nearest-by-distance would say the same, but far beyond max the distances to
    // the top codes round to the same double and would fake a tie.)
    const double a = std::fabs(static_cast<double>(x));
    if (a >= values_.back().first) return sign | values_.back().second;
    // Within range the distance to the two neighbours of a is exact in double: a has 24
    // significant bits at about their exponent.
    double best_d = HUGE_VAL;
    std::uint8_t best = 0;
    for (const auto& [v, c] : values_) {
      const double d = std::fabs(v - a);
      if (d < best_d || (d == best_d && (c & 1) == 0)) {
        best_d = d;
        best = c;
      }
    }
    return sign | best;
  }

  // Value of the positive finite code c, and how many there are.
  double value(std::size_t i) const { return values_[i].first; }
  std::size_t size() const { return values_.size(); }

 private:
  Fp8Format f_;
  std::vector<std::pair<double, std::uint8_t>> values_;
};

void expect_encodes(const Oracle& o, Fp8Format f, float x) {
  const std::uint8_t want = o.expected(x);
  const std::uint8_t got = encode_fp8(x, f);
  ASSERT_EQ(got, want) << name(f) << " x=" << std::hexfloat << x << " bits=" << std::hex
                       << std::bit_cast<std::uint32_t>(x) << " got=0x" << int(got) << " want=0x"
                       << int(want);
}

TEST(Fp8, EncodesBoundariesAndSpecials) {
  for (Fp8Format f : kFormats) {
    const Oracle o(f);
    const Layout l = layout(f);
    const float max = f == Fp8Format::kE4M3 ? 448.0f : 57344.0f;
    const float max_ulp = f == Fp8Format::kE4M3 ? 32.0f : 8192.0f;
    const float min_sub = std::ldexp(1.0f, 1 - l.bias - l.mant_bits);
    const float min_normal = std::ldexp(1.0f, 1 - l.bias);
    const float largest_sub = min_normal - min_sub;
    std::vector<float> xs = {0.0f,
                             max,
                             std::nextafter(max, 0.0f),
                             std::nextafter(max, INFINITY),
                             max + max_ulp / 2,  // tie beyond max
                             std::nextafter(max + max_ulp / 2, INFINITY),
                             max - max_ulp / 4,  // rounds to max from below
                             2 * max,
                             FLT_MAX,
                             INFINITY,
                             NAN,
                             std::bit_cast<float>(0x7f800001u),  // signalling NaN
                             std::bit_cast<float>(0x7fffffffu),
                             min_sub,
                             min_sub / 2,  // tie between 0 and min_sub: 0 is even
                             std::nextafter(min_sub / 2, INFINITY),
                             std::nextafter(min_sub / 2, 0.0f),
                             1.5f * min_sub,  // tie between codes 1 and 2: 2
                             2.5f * min_sub,  // tie between codes 2 and 3: 2
                             largest_sub,
                             largest_sub + min_sub / 2,  // tie, carries into the smallest normal
                             min_normal,
                             std::nextafter(min_normal, 0.0f),
                             FLT_MIN,
                             std::numeric_limits<float>::denorm_min(),
                             1.0f,
                             1.0f + 1.0f / (2 << l.mant_bits),   // tie at 1: stays at 1.0
                             1.0f + 3.0f / (2 << l.mant_bits)};  // tie: goes up to the even code
    for (float x : xs) {
      expect_encodes(o, f, x);
      expect_encodes(o, f, -x);
    }
    // NaN and infinities, whose codes differ between the formats, spelt out.
    const bool e4 = f == Fp8Format::kE4M3;
    EXPECT_EQ(encode_fp8(NAN, f), e4 ? 0x7f : 0x7e);
    EXPECT_EQ(encode_fp8(-NAN, f), e4 ? 0xff : 0xfe);
    EXPECT_EQ(encode_fp8(INFINITY, f), e4 ? 0x7e : 0x7c);
    EXPECT_EQ(encode_fp8(-INFINITY, f), e4 ? 0xfe : 0xfc);
    EXPECT_EQ(encode_fp8(1e30f, f), e4 ? 0x7e : 0x7b);
    EXPECT_EQ(encode_fp8(-0.0f, f), 0x80);
  }
}

// Every non-NaN code survives decode then encode; NaN codes stay NaN codes.
TEST(Fp8, RoundTripsEveryCode) {
  for (Fp8Format f : kFormats) {
    for (unsigned c = 0; c < 256; ++c) {
      const auto code = static_cast<std::uint8_t>(c);
      const std::uint8_t back = encode_fp8(decode_fp8(code, f), f);
      if (fp8_is_nan(code, f)) {
        EXPECT_TRUE(fp8_is_nan(back, f)) << name(f) << " " << c;
      } else {
        EXPECT_EQ(back, code) << name(f) << " " << c;
      }
    }
  }
}

TEST(Fp8, EncodesMillionsOfRandomFloatsLikeTheOracle) {
  const std::uint64_t seed = std::random_device{}() | (std::uint64_t{std::random_device{}()} << 32);
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (Fp8Format f : kFormats) {
    const Oracle o(f);
    const Layout l = layout(f);
    const int lo_exp = 1 - l.bias - l.mant_bits - 3;  // a little below half the min subnormal
    const int hi_exp = (1 << (7 - l.mant_bits)) - 1 - l.bias + 2;  // a little above max
    for (int i = 0; i < 1'500'000; ++i) {
      const std::uint64_t r = rng();
      const std::uint32_t sign = static_cast<std::uint32_t>(r >> 63) << 31;
      float x;
      switch (i % 5) {
        case 0:  // any bit pattern: huge, tiny, NaN, inf, fp32 subnormals
          x = std::bit_cast<float>(static_cast<std::uint32_t>(r));
          break;
        case 1:
        case 2: {  // around the format's range, uniformly in exponent
          const int e = lo_exp + static_cast<int>((r >> 32) % (hi_exp - lo_exp + 1));
          const std::uint32_t mant = static_cast<std::uint32_t>(r) & 0x7fffffu;
          x = std::bit_cast<float>(sign | (std::uint32_t(e + 127) << 23) | mant);
          break;
        }
        case 3: {  // exact midpoint of two adjacent codes, or one fp32 ulp either side
          const std::size_t k = (r >> 8) % (o.size() - 1);
          const float mid = static_cast<float>((o.value(k) + o.value(k + 1)) / 2);
          const int nudge = static_cast<int>(r % 3);
          x = nudge == 0 ? mid : std::nextafter(mid, nudge == 1 ? 0.0f : INFINITY);
          if (sign) x = -x;
          break;
        }
        default:  // fp32 subnormals
          x = std::bit_cast<float>(sign | (static_cast<std::uint32_t>(r) & 0x7fffffu));
      }
      expect_encodes(o, f, x);
      if (HasFatalFailure()) return;
    }
  }
}

}  // namespace
}  // namespace shmoe::numeric
