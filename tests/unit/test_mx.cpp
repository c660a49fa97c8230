// MX block quantisation: E8M0 scales against floor(log2) computed by the C library, the
// quantise -> dequantise error against the bound the formats allow, the special blocks (zero, NaN,
// infinity, partial), bf16 input, and the AVX2 kernel against the scalar one bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "numeric/half.hpp"
#include "numeric/mx.hpp"

namespace shmoe::numeric {
namespace {

constexpr Fp8Format kFormats[] = {Fp8Format::kE4M3, Fp8Format::kE5M2};
constexpr MxKernel kKernels[] = {MxKernel::kScalar, MxKernel::kAvx2, MxKernel::kAvx512};

std::string name(Fp8Format f) {
  return f == Fp8Format::kE4M3 ? "E4M3" : "E5M2";
}
std::string name(MxKernel k) {
  return k == MxKernel::kScalar ? "scalar" : k == MxKernel::kAvx2 ? "avx2" : "avx512";
}

std::uint64_t fresh_seed() {
  return std::random_device{}() | (std::uint64_t{std::random_device{}()} << 32);
}

// OCP MX v1.0 numbers, restated here: emax_elem, mantissa bits, bias, largest finite element.
struct Elem {
  int emax;
  int mant_bits;
  int bias;
  double max;
};
Elem elem(Fp8Format f) {
  return f == Fp8Format::kE4M3 ? Elem{8, 3, 7, 448.0} : Elem{15, 2, 15, 57344.0};
}

// Scale exponent by the OCP rule, with floor(log2) from ilogb (exact, subnormals included).
int expected_scale_exp(double amax, Fp8Format f) {
  if (amax == 0) return -127;
  return std::clamp(std::ilogb(amax) - elem(f).emax, -127, 127);
}

TEST(E8m0, DecodesEveryCode) {
  for (unsigned c = 0; c < 255; ++c) {
    const float v = e8m0_to_float(static_cast<std::uint8_t>(c));
    EXPECT_EQ(static_cast<double>(v), std::ldexp(1.0, static_cast<int>(c) - 127)) << c;
  }
  EXPECT_TRUE(std::isnan(e8m0_to_float(0xff)));
}

TEST(E8m0, ScaleCodeIsFloorLog2MinusEmaxClamped) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (Fp8Format f : kFormats) {
    auto check = [f](float amax) {
      const int want = expected_scale_exp(std::fabs(static_cast<double>(amax)), f) + 127;
      ASSERT_EQ(e8m0_scale_code(amax, f), want) << name(f) << " " << std::hexfloat << amax;
      ASSERT_EQ(e8m0_scale_code(-amax, f), want) << name(f) << " " << std::hexfloat << -amax;
    };
    std::vector<float> xs = {0.0f,    FLT_TRUE_MIN, FLT_MIN, std::nextafter(FLT_MIN, 0.0f),
                             FLT_MAX, 0x1p-140f,    1.0f,    448.0f,
                             57344.0f};
    for (int k = -149; k <= 127; ++k) {
      const float p = std::ldexp(1.0f, k);
      xs.insert(xs.end(), {p, std::nextafter(p, 0.0f), std::nextafter(p, INFINITY)});
    }
    for (float x : xs) {
      check(x);
      if (HasFatalFailure()) return;
    }
    for (int i = 0; i < 200000; ++i) {
      const float x = std::bit_cast<float>(static_cast<std::uint32_t>(rng()) & 0x7fffffffu);
      if (std::isfinite(x)) check(x);
      if (HasFatalFailure()) return;
    }
    EXPECT_EQ(e8m0_scale_code(0.0f, f), 0);
    EXPECT_EQ(e8m0_scale_code(0x1p-140f, f), 0);  // clamped at 2^-127
    EXPECT_EQ(e8m0_scale_code(1.0f, f), 127 - elem(f).emax);
    EXPECT_EQ(e8m0_scale_code(FLT_MAX, f), 254 - elem(f).emax);
    EXPECT_EQ(e8m0_scale_code(INFINITY, f), 0xff);
    EXPECT_EQ(e8m0_scale_code(NAN, f), 0xff);
  }
}

// A block of 32 with magnitudes up to 2^top and random structure, finite values only.
void fill_block(std::mt19937_64& rng, float* x, int top) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const int mode = static_cast<int>(rng() % 5);
  for (int i = 0; i < 32; ++i) {
    double m = 0;
    switch (mode) {
      case 0:  // uniform below the top: many elements in the top binades
        m = unit(rng);
        break;
      case 1:  // log-uniform over 2^-40: reaches the scaled subnormals and zero
        m = std::exp2(-40.0 * unit(rng));
        break;
      case 2:  // just below the next power of two: the saturating range [max, 2^(emax+1))
        m = 1.0 - std::exp2(-1.0 - 12.0 * unit(rng));
        break;
      case 3:  // exact small multiples, exact zeros
        m = static_cast<double>(rng() % 9) / 8.0;
        break;
      default:  // 5 significant bits, often a tie for either format's rounding
        m = std::ldexp(static_cast<double>(16 + rng() % 16), -5 - static_cast<int>(rng() % 24));
    }
    const double v = std::ldexp(m, top);
    x[i] = static_cast<float>((rng() & 1) ? -v : v);
    if (!std::isfinite(x[i])) x[i] = (rng() & 1) ? -FLT_MAX : FLT_MAX;
  }
}

// The same, with amax anywhere from an fp32 subnormal to near the largest float.
void fill_block(std::mt19937_64& rng, float* x) {
  fill_block(rng, x, -150 + static_cast<int>(rng() % 278));
}

// Each dequantised element against the exact bound. With S the block scale and y = x / S exact:
//  - |y| < max: round to nearest, so |error| <= ulp(y) / 2 * S, where ulp(y) =
//    2^(max(floor(log2|y|), 1 - bias) - mant_bits). Relative to |x| that is at most 2^-(m+1):
//    2^-4 (E4M3) and 2^-3 (E5M2), until y falls into the element subnormals, where the absolute
//    bound 2^(-bias - m) * S takes over.
//  - |y| >= max: possible only for the block's largest elements, as y < 2^(emax+1); the element
//    saturates to max, an error below (2^(emax+1) - max) * S = 2^(emax-2) * S, i.e. under 1/7 of
//    |x|. That is the OCP rule, not a rounding error: the test demands exactly max * S.
void check_block(const float* x, const std::uint8_t* codes, std::uint8_t scale, const float* y,
                 Fp8Format f) {
  const Elem e = elem(f);
  double amax = 0;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
  const int s_exp = expected_scale_exp(amax, f);
  ASSERT_EQ(scale, s_exp + 127) << name(f) << " amax " << std::hexfloat << amax;
  for (int i = 0; i < 32; ++i) {
    const double xi = x[i];
    const double scaled = std::ldexp(xi, -s_exp);
    const double got = y[i];
    // Also against the definition q_i = encode(x_i / 2^s), with ldexp doing the division.
    ASSERT_EQ(codes[i], encode_fp8(std::ldexp(x[i], -s_exp), f)) << i;
    if (std::fabs(scaled) >= e.max) {
      ASSERT_EQ(got, std::copysign(std::ldexp(e.max, s_exp), xi))
          << i << " " << std::hexfloat << xi;
      continue;
    }
    const int binade = scaled == 0 ? 1 - e.bias : std::max(std::ilogb(scaled), 1 - e.bias);
    const double half_ulp = std::ldexp(1.0, binade - e.mant_bits - 1 + s_exp);
    ASSERT_LE(std::fabs(got - xi), half_ulp)
        << name(f) << " i=" << i << " x=" << std::hexfloat << xi << " got " << got;
    if (std::ilogb(scaled) >= 1 - e.bias) {
      ASSERT_LE(std::fabs(got - xi), std::ldexp(std::fabs(xi), -e.mant_bits - 1)) << i;
    }
    ASSERT_EQ(std::signbit(got), std::signbit(xi)) << i;
  }
}

TEST(Mx, QuantiseDequantiseErrorWithinTheFormatBound) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  constexpr std::size_t kBlocks = 20000, n = kBlocks * 32;
  std::vector<float> x(n), y(n);
  std::vector<std::uint8_t> codes(n), scales(kBlocks);
  for (std::size_t b = 0; b < kBlocks; ++b) fill_block(rng, &x[b * 32]);
  for (Fp8Format f : kFormats) {
    for (MxKernel k : kKernels) {
      if (!mx_kernel_available(k)) continue;
      SCOPED_TRACE(name(f) + " " + name(k));
      quantize_mx(x.data(), n, f, codes.data(), scales.data(), k);
      dequantize_mx(codes.data(), scales.data(), n, f, y.data(), k);
      for (std::size_t b = 0; b < kBlocks; ++b) {
        check_block(&x[b * 32], &codes[b * 32], scales[b], &y[b * 32], f);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// One block through quantise and dequantise with the given kernel.
struct Block {
  std::uint8_t codes[32];
  std::uint8_t scale;
  float y[32];
};
Block roundtrip(const float* x, Fp8Format f, MxKernel k) {
  Block r;
  quantize_mx(x, 32, f, r.codes, &r.scale, k);
  dequantize_mx(r.codes, &r.scale, 32, f, r.y, k);
  return r;
}

TEST(Mx, SpecialBlocks) {
  for (Fp8Format f : kFormats) {
    for (MxKernel k : kKernels) {
      if (!mx_kernel_available(k)) continue;
      SCOPED_TRACE(name(f) + " " + name(k));
      float x[32];
      // All zeros, of both signs: smallest scale, zero codes that keep the sign.
      for (int i = 0; i < 32; ++i) x[i] = (i & 1) ? -0.0f : 0.0f;
      Block r = roundtrip(x, f, k);
      EXPECT_EQ(r.scale, 0);
      for (int i = 0; i < 32; ++i) {
        EXPECT_EQ(r.codes[i], (i & 1) ? 0x80 : 0x00);
        EXPECT_EQ(std::bit_cast<std::uint32_t>(r.y[i]), std::bit_cast<std::uint32_t>(x[i]));
      }
      // Exact powers of two: the largest lands on 2^emax, everything comes back exactly.
      for (int i = 0; i < 32; ++i) x[i] = std::ldexp(1.0f, 20 - (i % 6));
      r = roundtrip(x, f, k);
      EXPECT_EQ(r.scale, 20 - elem(f).emax + 127);
      for (int i = 0; i < 32; ++i) EXPECT_EQ(r.y[i], x[i]) << i;
      // Tiny block: the scale clamps at 2^-127 and values are still found where the element
      // format reaches: 2^-133 is 2^-6 at that scale, normal in both formats.
      for (int i = 0; i < 32; ++i) x[i] = (i & 1) ? -0x1p-133f : 0x1p-135f;
      r = roundtrip(x, f, k);
      EXPECT_EQ(r.scale, 0);
      for (int i = 0; i < 32; ++i) EXPECT_EQ(r.y[i], x[i]) << i;
      // Huge block: FLT_MAX scales to just under 2^(emax+1) and saturates to max * 2^(127-emax).
      for (int i = 0; i < 32; ++i) x[i] = (i & 1) ? -FLT_MAX : 1.0f;
      r = roundtrip(x, f, k);
      EXPECT_EQ(r.scale, 254 - elem(f).emax);
      EXPECT_EQ(static_cast<double>(r.y[1]), -std::ldexp(elem(f).max, 127 - elem(f).emax));
      EXPECT_TRUE(std::isfinite(r.y[1]));
      // NaN or infinity anywhere: NaN scale, and the whole block dequantises to the quiet NaN.
      for (float bad : {NAN, -NAN, INFINITY, -INFINITY}) {
        for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i);
        x[7] = bad;
        r = roundtrip(x, f, k);
        EXPECT_EQ(r.scale, 0xff) << bad;
        for (int i = 0; i < 32; ++i)
          EXPECT_EQ(std::bit_cast<std::uint32_t>(r.y[i]), 0x7fc00000u) << bad << " " << i;
      }
    }
  }
}

TEST(Mx, PartialLastBlockIsScaledOnItsOwn) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (Fp8Format f : kFormats) {
    for (MxKernel k : kKernels) {
      if (!mx_kernel_available(k)) continue;
      SCOPED_TRACE(name(f) + " " + name(k));
      for (std::size_t n : {1u, 5u, 31u, 33u, 70u, 95u}) {
        std::vector<float> x(96);
        for (std::size_t b = 0; b < 3; ++b) fill_block(rng, &x[b * 32]);
        // Sentinels past the end must survive.
        std::vector<std::uint8_t> codes(96, 0xa5), scales(4, 0xa5);
        std::vector<float> y(96, 42.0f);
        quantize_mx(x.data(), n, f, codes.data(), scales.data(), k);
        dequantize_mx(codes.data(), scales.data(), n, f, y.data(), k);
        const std::size_t blocks = mx_num_blocks(n), last = (blocks - 1) * 32;
        for (std::size_t i = n; i < 96; ++i) ASSERT_EQ(codes[i], 0xa5) << n;
        for (std::size_t i = n; i < 96; ++i) ASSERT_EQ(y[i], 42.0f) << n;
        for (std::size_t b = blocks; b < 4; ++b) ASSERT_EQ(scales[b], 0xa5) << n;
        // The last block equals the same elements quantised alone, and its scale depends only on
        // them.
        std::uint8_t alone_codes[32], alone_scale;
        quantize_mx(&x[last], n - last, f, alone_codes, &alone_scale, MxKernel::kScalar);
        ASSERT_EQ(scales[blocks - 1], alone_scale) << n;
        ASSERT_EQ(std::memcmp(&codes[last], alone_codes, n - last), 0) << n;
        double amax = 0;
        for (std::size_t i = last; i < n; ++i) amax = std::max(amax, std::fabs(double(x[i])));
        ASSERT_EQ(alone_scale, expected_scale_exp(amax, f) + 127) << n;
        for (std::size_t i = last; i < n; ++i) {
          ASSERT_EQ(y[i], static_cast<double>(decode_fp8(codes[i], f)) *
                              std::ldexp(1.0, int(scales[blocks - 1]) - 127))
              << n << " " << i;
        }
      }
    }
  }
}

// Random fp32 data for the kernel comparison: blocks of the kinds above, with NaNs, infinities,
// fp32 subnormals and raw bit patterns sprinkled in.
std::vector<float> random_input(std::mt19937_64& rng, std::size_t n) {
  std::vector<float> x(n + 32);
  for (std::size_t b = 0; b < n; b += 32) fill_block(rng, &x[b]);
  x.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t r = rng();
    if (r % 4096 == 0)
      x[i] = std::bit_cast<float>(static_cast<std::uint32_t>(r >> 32));  // any pattern
    if (r % 65536 == 1) x[i] = (r & (1u << 20)) ? NAN : INFINITY;
    if (r % 512 == 2)
      x[i] = std::bit_cast<float>(static_cast<std::uint32_t>(r >> 32) & 0x807fffffu);
  }
  return x;
}

TEST(Mx, Bf16InputMatchesFp32Input) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::size_t n = (1 << 18) + 13;
  const std::vector<float> src = random_input(rng, n);
  std::vector<std::uint16_t> h(n);
  std::vector<float> widened(n);
  for (std::size_t i = 0; i < n; ++i) {
    h[i] = float_to_bf16(src[i]).bits;
    widened[i] = bf16_to_float({h[i]});
  }
  std::vector<std::uint8_t> c1(n), c2(n), s1(mx_num_blocks(n)), s2(mx_num_blocks(n));
  for (Fp8Format f : kFormats) {
    for (MxKernel k : kKernels) {
      if (!mx_kernel_available(k)) continue;
      quantize_mx(widened.data(), n, f, c1.data(), s1.data(), MxKernel::kScalar);
      quantize_mx_bf16(h.data(), n, f, c2.data(), s2.data(), k);
      ASSERT_EQ(c1, c2) << name(f) << " " << name(k);
      ASSERT_EQ(s1, s2) << name(f) << " " << name(k);
    }
  }
}

template <typename T>
std::size_t first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  return static_cast<std::size_t>(std::mismatch(a.begin(), a.end(), b.begin()).first - a.begin());
}

// The bf16 form feeds the GEMMs: it must be the fp32 value exactly wherever that is an fp32
// normal (an FP8 code has at most 4 significant bits), and float_to_bf16 of it everywhere.
TEST(Mx, DequantiseToBf16IsExact) {
  for (Fp8Format f : kFormats) {
    for (MxKernel k : kKernels) {
      if (!mx_kernel_available(k)) continue;
      SCOPED_TRACE(name(f) + " " + name(k));
      // Every code under every scale: block s holds codes 32(s%8) .. 32(s%8)+31 under scale s / 8.
      const std::size_t n = 256 * 8 * kMxBlockSize + 7;  // and a partial last block
      std::vector<std::uint8_t> codes(n), scales(mx_num_blocks(n));
      for (std::size_t i = 0; i < n; ++i) codes[i] = static_cast<std::uint8_t>(i);
      for (std::size_t b = 0; b < scales.size(); ++b) scales[b] = static_cast<std::uint8_t>(b / 8);
      std::vector<float> values(n);
      std::vector<std::uint16_t> bf(n);
      dequantize_mx(codes.data(), scales.data(), n, f, values.data(), MxKernel::kScalar);
      dequantize_mx_bf16(codes.data(), scales.data(), n, f, bf.data(), k);
      std::size_t exact = 0;
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(bf[i], float_to_bf16(values[i]).bits) << "element " << i;
        const float v = values[i];
        if (std::isnan(v)) continue;
        if (v == 0 || std::isinf(v) || std::fabs(v) >= FLT_MIN) {
          ASSERT_EQ(std::bit_cast<std::uint32_t>(bf16_to_float({bf[i]})),
                    std::bit_cast<std::uint32_t>(v))
              << "element " << i << std::hexfloat << " value " << v;
          ++exact;
        }
      }
      EXPECT_GT(exact, n * 3 / 4);  // most scales keep every value normal
    }
  }
}

// round_trip_mx(_bf16) against the scalar quantize_mx then dequantize_mx(_bf16), bit for bit:
// data of every kind (random_input: most groups of 16 blocks hold one with a special scale), then
// groups whose every block has a scale keeping its values normal (the AVX-512 kernel's own path).
TEST(Mx, RoundTripIsQuantiseThenDequantise) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::size_t n = (std::size_t{1} << 20) + 45;  // a partial block at the end
  std::vector<float> x = random_input(rng, n), real(n + 32);
  for (std::size_t b = 0; b < n; b += 32)
    fill_block(rng, &real[b], -90 + static_cast<int>(rng() % 191));
  real.resize(n);
  std::vector<std::uint8_t> codes(n), scales(mx_num_blocks(n));
  std::vector<float> y_ref(n), y(n);
  std::vector<std::uint16_t> b_ref(n), b(n);
  for (const std::vector<float>* in : {&x, &real}) {
    for (Fp8Format f : kFormats) {
      quantize_mx(in->data(), n, f, codes.data(), scales.data(), MxKernel::kScalar);
      dequantize_mx(codes.data(), scales.data(), n, f, y_ref.data(), MxKernel::kScalar);
      dequantize_mx_bf16(codes.data(), scales.data(), n, f, b_ref.data(), MxKernel::kScalar);
      std::vector<std::uint32_t> u_ref(n), u(n);
      std::memcpy(u_ref.data(), y_ref.data(), n * 4);
      for (MxKernel k : kKernels) {
        if (!mx_kernel_available(k)) continue;
        SCOPED_TRACE(name(f) + " " + name(k) + (in == &x ? " any data" : " real data"));
        round_trip_mx(in->data(), n, f, y.data(), k);
        std::memcpy(u.data(), y.data(), n * 4);
        ASSERT_EQ(u_ref, u) << "element " << first_difference(u_ref, u);
        round_trip_mx_bf16(in->data(), n, f, b.data(), k);
        ASSERT_EQ(b_ref, b) << "bf16 element " << first_difference(b_ref, b);
      }
    }
  }
}

// Each vector kernel the CPU has, against the scalar one. The length leaves a partial last block.
class MxVectorKernel : public ::testing::TestWithParam<MxKernel> {};

TEST_P(MxVectorKernel, IsBitIdenticalToScalar) {
  const MxKernel vec_kernel = GetParam();
  if (!mx_kernel_available(vec_kernel)) GTEST_SKIP() << "no " << name(vec_kernel) << " on this CPU";
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::size_t n = (std::size_t{1} << 22) + 19;  // a partial block at the end
  const std::size_t nb = mx_num_blocks(n);
  const std::vector<float> x = random_input(rng, n);
  std::vector<std::uint16_t> h(n);
  for (std::size_t i = 0; i < n; ++i)
    h[i] = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(x[i]) >> 16);
  std::vector<std::uint8_t> rand_codes(n), rand_scales(nb);
  for (auto& c : rand_codes) c = static_cast<std::uint8_t>(rng());
  for (auto& s : rand_scales) s = static_cast<std::uint8_t>(rng());

  std::vector<std::uint8_t> c_ref(n), c_vec(n), s_ref(nb), s_vec(nb);
  std::vector<float> y_ref(n), y_vec(n);
  std::vector<std::uint16_t> b_ref(n), b_vec(n);
  auto bits = [](const std::vector<float>& v) {
    std::vector<std::uint32_t> u(v.size());
    std::memcpy(u.data(), v.data(), v.size() * 4);
    return u;
  };
  for (Fp8Format f : kFormats) {
    SCOPED_TRACE(name(f));
    quantize_mx(x.data(), n, f, c_ref.data(), s_ref.data(), MxKernel::kScalar);
    quantize_mx(x.data(), n, f, c_vec.data(), s_vec.data(), vec_kernel);
    ASSERT_EQ(s_ref, s_vec) << "block " << first_difference(s_ref, s_vec);
    ASSERT_EQ(c_ref, c_vec) << "element " << first_difference(c_ref, c_vec);

    quantize_mx_bf16(h.data(), n, f, c_ref.data(), s_ref.data(), MxKernel::kScalar);
    quantize_mx_bf16(h.data(), n, f, c_vec.data(), s_vec.data(), vec_kernel);
    ASSERT_EQ(s_ref, s_vec) << "bf16 block " << first_difference(s_ref, s_vec);
    ASSERT_EQ(c_ref, c_vec) << "bf16 element " << first_difference(c_ref, c_vec);

    // Shorter rows, whose last whole blocks are fewer than a vector kernel's group of 16: an even
    // count (a GEMM epilogue's 128-column panel), an even count and one more, a partial block.
    for (const std::size_t m :
         {std::size_t{128}, std::size_t{7 * 32 + 5}, std::size_t{3 * 512 + 9 * 32 + 19}}) {
      SCOPED_TRACE(testing::Message() << "n=" << m);
      const std::size_t mb = mx_num_blocks(m);
      quantize_mx(x.data(), m, f, c_ref.data(), s_ref.data(), MxKernel::kScalar);
      quantize_mx(x.data(), m, f, c_vec.data(), s_vec.data(), vec_kernel);
      ASSERT_TRUE(std::equal(s_ref.begin(), s_ref.begin() + mb, s_vec.begin()));
      ASSERT_TRUE(std::equal(c_ref.begin(), c_ref.begin() + m, c_vec.begin()));
    }

    // Every code under every scale, NaN scale included.
    dequantize_mx(rand_codes.data(), rand_scales.data(), n, f, y_ref.data(), MxKernel::kScalar);
    dequantize_mx(rand_codes.data(), rand_scales.data(), n, f, y_vec.data(), vec_kernel);
    const auto u_ref = bits(y_ref), u_vec = bits(y_vec);
    ASSERT_EQ(u_ref, u_vec) << "dequantise element " << first_difference(u_ref, u_vec);

    dequantize_mx_bf16(rand_codes.data(), rand_scales.data(), n, f, b_ref.data(),
                       MxKernel::kScalar);
    dequantize_mx_bf16(rand_codes.data(), rand_scales.data(), n, f, b_vec.data(), vec_kernel);
    ASSERT_EQ(b_ref, b_vec) << "bf16 dequantise element " << first_difference(b_ref, b_vec);
  }
}

INSTANTIATE_TEST_SUITE_P(Mx, MxVectorKernel, ::testing::Values(MxKernel::kAvx2, MxKernel::kAvx512),
                         [](const auto& info) { return name(info.param); });

}  // namespace
}  // namespace shmoe::numeric
