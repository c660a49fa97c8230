// The checks shmoe-moe's options share beyond CLI11's own. CLI11's Range lets NaN through (every
// comparison with NaN is false), and a NaN zipf exponent made the routing loop forever.
#pragma once

#include <CLI/CLI.hpp>
#include <cmath>
#include <string>

namespace shmoe::tools {

// A finite number in [lo, hi]: NaN and infinities are refused with the range.
inline CLI::Validator finite_range(double lo, double hi) {
  const std::string range =
      "[" + CLI::detail::to_string(lo) + " - " + CLI::detail::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& input) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(input, v)) return "Value " + input + " is not a number";
        if (!std::isfinite(v) || v < lo || v > hi) {
          return "Value " + input + " not a finite number in range " + range;
        }
        return std::string{};
      },
      "FLOAT in " + range);
}

// An unsigned integer written as digits (CLI11 would read "-1" into an unsigned as its wrap).
inline CLI::Validator digits_only() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        if (input.empty() || input.find_first_not_of("0123456789") != std::string::npos) {
          return "Value " + input + " is not an integer in range [0 - 18446744073709551615]";
        }
        return std::string{};
      },
      "UINT");
}

}  // namespace shmoe::tools
