#include "common/cpu_features.hpp"

namespace shmoe {

#if defined(__x86_64__) || defined(__i386__)

// __builtin_cpu_init first: a static initialiser of another translation unit may ask before the
// library's own has run.
bool cpu_has_avx2() {
  static const bool kHas = (__builtin_cpu_init(), __builtin_cpu_supports("avx2") != 0);
  return kHas;
}
bool cpu_has_avx512f() {
  static const bool kHas = (__builtin_cpu_init(), __builtin_cpu_supports("avx512f") != 0);
  return kHas;
}
bool cpu_has_avx512bw() {
  static const bool kHas = cpu_has_avx512f() && __builtin_cpu_supports("avx512bw") != 0;
  return kHas;
}
bool cpu_has_fma() {
  static const bool kHas = cpu_has_avx2() && __builtin_cpu_supports("fma") != 0;
  return kHas;
}
bool cpu_has_avx512bf16() {
  static const bool kHas = cpu_has_avx512bw() && __builtin_cpu_supports("avx512bf16") != 0;
  return kHas;
}

#else

bool cpu_has_avx2() {
  return false;
}
bool cpu_has_avx512f() {
  return false;
}
bool cpu_has_avx512bw() {
  return false;
}
bool cpu_has_fma() {
  return false;
}
bool cpu_has_avx512bf16() {
  return false;
}

#endif

}  // namespace shmoe
