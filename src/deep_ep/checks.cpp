#include "deep_ep/checks.hpp"

#include <fmt/format.h>
#include <shmem.h>

#include <algorithm>
#include <vector>

namespace shmoe::deep_ep {

std::string dtype_name(shmoe_dtype_t t) {
  const std::string name = shmoe_dtype_name(t);
  return name != "?" ? name : fmt::format("dtype #{}", static_cast<int>(t));
}

std::string shape_text(const shmoe_tensor_t& t) {
  std::vector<std::int64_t> s(t.shape, t.shape + std::clamp(t.ndim, 0, SHMOE_TENSOR_MAX_DIMS));
  return fmt::format("[{}]", fmt::join(s, ", "));
}

bool Checks::tensor(const shmoe_tensor_t& t, const char* name,
                    std::initializer_list<shmoe_dtype_t> dtypes, std::initializer_list<Dim> dims) {
  if (any()) return false;
  std::vector<std::string> names;
  for (shmoe_dtype_t d : dtypes) names.push_back(dtype_name(d));
  std::vector<std::string> want;
  for (const Dim& d : dims) {
    want.push_back(d.size == Dim::kAny ? "*" : (d.at_least ? ">=" : "") + std::to_string(d.size));
  }
  const std::string allowed = fmt::format("a tensor of {} with shape [{}]",
                                          fmt::join(names, " or "), fmt::join(want, ", "));
  if (t.data == nullptr) {
    refuse(fmt::format("{} is missing; it must be {}", name, allowed));
    return false;
  }
  bool ok = std::find(dtypes.begin(), dtypes.end(), t.dtype) != dtypes.end() &&
            t.ndim == static_cast<int>(dims.size());
  int axis = 0;
  for (const Dim& d : dims) {
    if (!ok) break;
    const std::int64_t got = t.shape[axis++];
    ok = d.size == Dim::kAny || (d.at_least ? got >= d.size : got == d.size);
  }
  if (!ok) {
    refuse(fmt::format("{} ({} of shape {}) must be {}", name, dtype_name(t.dtype), shape_text(t),
                       allowed));
  }
  return ok;
}

bool Checks::range(const char* name, std::int64_t v, std::int64_t low, std::int64_t high) {
  if (any()) return false;
  if (v < low || (high >= low && v > high)) {
    refuse(high >= low ? fmt::format("{}={} is out of range ({}..{})", name, v, low, high)
                       : fmt::format("{}={} must be at least {}", name, v, low));
    return false;
  }
  return true;
}

int host_layout(int n, int me) {
  const int shared = shmem_team_n_pes(SHMEM_TEAM_SHARED);
  const bool regular =
      shared >= 1 && n % shared == 0 &&
      shmem_team_translate_pe(SHMEM_TEAM_SHARED, 0, SHMEM_TEAM_WORLD) == me / shared * shared;
  return regular ? shared : 1;
}

}  // namespace shmoe::deep_ep
