// SwiGLU's fp32 kernels: silu(z) * up against fp64 over the whole range where it is neither 0 nor
// overflowing (and where e^-z reaches fp32's subnormals), the IEEE special cases, and the AVX2
// kernel against the scalar one bit for bit.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "numeric/swiglu.hpp"

namespace shmoe::numeric {
namespace {

constexpr SwigluKernel kKernels[] = {SwigluKernel::kScalar, SwigluKernel::kAvx2,
                                     SwigluKernel::kAvx512};

std::string name(SwigluKernel k) {
  return k == SwigluKernel::kScalar ? "scalar" : k == SwigluKernel::kAvx2 ? "avx2" : "avx512";
}

double silu64(double z) {
  return z / (1.0 + std::exp(-z));
}

// Every z in [-100, 100] at spacing 2^-12, and random fp32 values around 0 and in the tails.
std::vector<float> gate_values(std::mt19937_64& rng) {
  std::vector<float> z;
  for (double v = -100; v <= 100; v += 0x1p-12) z.push_back(static_cast<float>(v));
  std::uniform_real_distribution<float> wide(-120.0f, 120.0f), small(-1e-3f, 1e-3f);
  for (int i = 0; i < 200000; ++i) {
    z.push_back(wide(rng));
    z.push_back(small(rng));
  }
  return z;
}

TEST(Swiglu, WithinFourUlpOfFp64) {
  std::mt19937_64 rng(std::random_device{}());
  const std::vector<float> z = gate_values(rng);
  const std::vector<float> one(z.size(), 1.0f);
  std::vector<float> got(z.size());
  for (SwigluKernel k : kKernels) {
    if (!swiglu_kernel_available(k)) continue;
    SCOPED_TRACE(name(k));
    swiglu(z.data(), one.data(), z.size(), got.data(), k);
    double worst_ulps = 0;
    for (std::size_t i = 0; i < z.size(); ++i) {
      const double want = silu64(z[i]);
      // One ulp of the result; fp32 subnormals have a fixed spacing of 2^-149.
      const double ulp =
          std::max(std::ldexp(1.0, std::ilogb(std::max(std::fabs(want), 0x1p-126)) - 23), 0x1p-149);
      // Once e^-z overflows fp32 (z below -88.72) silu(z) is -0, the true value below 3e-37.
      const double err = std::fabs(got[i] - want);
      if (z[i] < -88.72f && got[i] == 0) {
        ASSERT_LT(std::fabs(want), 3e-37) << std::hexfloat << "z=" << z[i];
        continue;
      }
      worst_ulps = std::max(worst_ulps, err / ulp);
      ASSERT_LE(err, 4 * ulp) << std::hexfloat << "z=" << z[i] << " got " << got[i] << " want "
                              << want;
    }
    RecordProperty("worst_ulps_" + name(k), std::to_string(worst_ulps));
  }
}

TEST(Swiglu, MultipliesByUpAndKeepsSpecialValues) {
  const float gate[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 3.0f, 3.0f, -1000.0f};
  const float up[] = {1.0f, 2.0f, 1.0f, 5.0f, 5.0f, -2.0f, 0.0f, 1.0f};
  for (SwigluKernel k : kKernels) {
    if (!swiglu_kernel_available(k)) continue;
    SCOPED_TRACE(name(k));
    float out[8];
    swiglu(gate, up, 8, out, k);
    EXPECT_TRUE(std::isnan(out[0]));
    EXPECT_EQ(out[1], INFINITY);
    EXPECT_TRUE(std::isnan(out[2]));  // -inf / (1 + inf), as the formula evaluates in IEEE
    EXPECT_EQ(std::bit_cast<std::uint32_t>(out[3]), 0u);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(out[4]), 0x80000000u);
    EXPECT_NEAR(out[5], -2.0 * silu64(3.0), 4e-7 * 2 * silu64(3.0));
    EXPECT_EQ(out[6], 0.0f);
    EXPECT_EQ(out[7], -0.0f);
  }
}

class SwigluVectorKernel : public ::testing::TestWithParam<SwigluKernel> {};

TEST_P(SwigluVectorKernel, IsBitIdenticalToScalar) {
  const SwigluKernel vec_kernel = GetParam();
  if (!swiglu_kernel_available(vec_kernel)) GTEST_SKIP() << "no " << name(vec_kernel) << " here";
  std::mt19937_64 rng(std::random_device{}());
  std::vector<float> gate = gate_values(rng), up(gate.size());
  // Arbitrary bit patterns too (NaNs, infinities, subnormals), with ordinary multipliers.
  for (int i = 0; i < 1000000; ++i)
    gate.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
  up.resize(gate.size());
  std::normal_distribution<float> normal;
  for (auto& u : up) u = normal(rng);
  for (int i = 0; i < 3; ++i) {  // a tail for the scalar loop
    gate.push_back(1.0f);
    up.push_back(1.0f);
  }
  std::vector<float> ref(gate.size()), vec(gate.size());
  swiglu(gate.data(), up.data(), gate.size(), ref.data(), SwigluKernel::kScalar);
  swiglu(gate.data(), up.data(), gate.size(), vec.data(), vec_kernel);
  for (std::size_t i = 0; i < gate.size(); ++i) {
    ASSERT_EQ(std::bit_cast<std::uint32_t>(ref[i]), std::bit_cast<std::uint32_t>(vec[i]))
        << std::hexfloat << "gate " << gate[i] << " up " << up[i];
  }
}

INSTANTIATE_TEST_SUITE_P(Swiglu, SwigluVectorKernel,
                         ::testing::Values(SwigluKernel::kAvx2, SwigluKernel::kAvx512),
                         [](const auto& info) { return name(info.param); });

}  // namespace
}  // namespace shmoe::numeric
