#include "slow_pe.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "median.hpp"

namespace shmoe::tools {
namespace {

constexpr double kMinExcessUs = 50;
constexpr double kMinRatio = 2;

}  // namespace

SlowPeVerdict judge_slow_pe(const std::vector<double>& wait_us, int n_pes) {
  SlowPeVerdict v;
  if (n_pes < 2) return v;
  const auto P = static_cast<std::size_t>(n_pes);
  std::vector<double> blame(P, 0);
  for (std::size_t s = 0; s < P; ++s) {
    for (std::size_t r = 0; r < P; ++r)
      if (r != s) blame[s] += wait_us[r * P + s];
    blame[s] /= static_cast<double>(P - 1);
  }
  const auto top =
      static_cast<std::size_t>(std::max_element(blame.begin(), blame.end()) - blame.begin());
  double next = -1e300;
  for (std::size_t s = 0; s < P; ++s)
    if (s != top) next = std::max(next, blame[s]);
  v.blame_us = blame[top];
  v.typical_us = median(blame);
  const double excess = blame[top] - v.typical_us, next_excess = next - v.typical_us;
  if (excess >= kMinExcessUs && excess >= kMinRatio * std::max(next_excess, 0.0))
    v.pe = static_cast<int>(top);
  return v;
}

std::string wait_matrix_text(const std::vector<double>& wait_us, int n_pes,
                             const SlowPeVerdict& verdict) {
  std::string out = "waits: microseconds each PE (row) waited for each PE (column) per call\n";
  out += fmt::format("{:>8}", "");
  for (int s = 0; s < n_pes; ++s) out += fmt::format(" {:>9}", fmt::format("PE {}", s));
  out += "\n";
  for (int r = 0; r < n_pes; ++r) {
    out += fmt::format("{:>8}", fmt::format("PE {}", r));
    for (int s = 0; s < n_pes; ++s)
      out += fmt::format(" {:>9.1f}", wait_us[static_cast<std::size_t>(r * n_pes + s)]);
    out += "\n";
  }
  if (verdict.pe >= 0) {
    out += fmt::format(
        "slow PE: {} (the others waited {:.1f} us per call for it; the median PE {:.1f} us)\n",
        verdict.pe, verdict.blame_us, verdict.typical_us);
  } else {
    out += fmt::format(
        "slow PE: none (the most waited-for PE: {:.1f} us per call; the median PE {:.1f} us)\n",
        verdict.blame_us, verdict.typical_us);
  }
  return out;
}

}  // namespace shmoe::tools
