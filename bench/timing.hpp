// Timing helpers shared by the C++ benchmarks.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace shmoe::bench {

inline double ms_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

inline double median(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Medians of `reps` runs of each, the runs alternating, so that every one sees the same machine
// (other processes come and go, and where several PEs' processes share a core they finish at
// different times), after one untimed round: the first run of a program was slower (in
// bench/mx_kernel, the kernel at one row of a out of cache read 0.70x of the plain read where
// the same kernel later in the run read 0.77x).
inline std::vector<double> alternating_median_ms(int reps,
                                                 const std::vector<std::function<void()>>& fs) {
  for (const auto& f : fs) f();
  std::vector<std::vector<double>> times(fs.size());
  for (int r = 0; r < reps; ++r)
    for (std::size_t i = 0; i < fs.size(); ++i) times[i].push_back(ms_of(fs[i]));
  std::vector<double> out;
  for (auto& t : times) out.push_back(median(std::move(t)));
  return out;
}

}  // namespace shmoe::bench
