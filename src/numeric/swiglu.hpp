// SwiGLU on fp32 rows: out[j] = silu(gate[j]) * up[j], silu(z) = z / (1 + e^-z).
//
// e^x is computed here rather than by libm so that it vectorises: Cody-Waite reduction to
// x = n ln2 + r, a degree-6 polynomial for e^r (Cephes' expf coefficients) and 2^n applied in two
// halves so that results down to fp32's subnormals stay right. silu is within 4 ulp of fp64
// (tests/unit/test_swiglu.cpp; measured worst 2.3), NaN in, NaN out; silu of z below -88.72 is -0,
// as e^-z overflows (the true value is below 3e-37), and of large positive z is z.
//
// The AVX2 (with FMA) and AVX-512 kernels perform the scalar code's operations in the same order
// with the same roundings (fused multiply-adds in the reduction and the polynomial, std::fmaf in
// the scalar code), so all give identical bits.
#pragma once

#include <cstddef>
#include <cstdint>

namespace shmoe::numeric {

// kAuto picks the widest the CPU has; asking for one it lacks runs the next narrower one.
enum class SwigluKernel : std::uint8_t { kAuto, kScalar, kAvx2, kAvx512 };
bool swiglu_kernel_available(SwigluKernel k);

void swiglu(const float* gate, const float* up, std::size_t n, float* out,
            SwigluKernel k = SwigluKernel::kAuto);

// The e^x above, one value at a time (what the kernels compute per element).
float swiglu_exp(float x);

}  // namespace shmoe::numeric
