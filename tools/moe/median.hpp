// The median of a sample (the mean of the middle two for an even count; 0 for none): what the
// tool reports of times that other processes on the machine spread out.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace shmoe::tools {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace shmoe::tools
