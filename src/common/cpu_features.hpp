// What the CPU can run, asked once per process: the kernels that have wider versions pick one at
// run time, since the machines this runs on change (AVX2 only, AVX-512, AVX512-BF16).
#pragma once

namespace shmoe {

// False on other architectures.
bool cpu_has_avx2();
bool cpu_has_avx512f();
bool cpu_has_avx512bw();
// Fused multiply-add (FMA3) with AVX2; AVX512-BF16's conversions and dot products.
bool cpu_has_fma();
bool cpu_has_avx512bf16();

}  // namespace shmoe
