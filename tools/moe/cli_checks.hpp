// The checks shmoe-moe's options share beyond CLI11's own. CLI11's Range lets NaN through (every
// comparison with NaN is false), and a NaN zipf exponent made the routing loop forever.
#pragma once

#include <CLI/CLI.hpp>
#include <cctype>
#include <cmath>
#include <map>
#include <string>
#include <string_view>

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

// A refusal of the public API's configuration check (shmoe_moe_config_check's text, "FN: RULE"),
// in this command line's words: FN dropped, and each whole word that names a field of the public
// struct replaced by the option that sets it (`names`: field -> option).
inline std::string in_option_names(std::string_view message,
                                   const std::map<std::string, std::string, std::less<>>& names) {
  if (const auto colon = message.find(": "); colon != std::string_view::npos)
    message.remove_prefix(colon + 2);
  auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::string out;
  for (std::size_t i = 0; i < message.size();) {
    if (!word_char(message[i])) {
      out += message[i++];
      continue;
    }
    std::size_t end = i;
    while (end < message.size() && word_char(message[end])) ++end;
    const std::string_view word = message.substr(i, end - i);
    const auto it = names.find(word);
    out += it == names.end() ? std::string(word) : it->second;
    i = end;
  }
  return out;
}

}  // namespace shmoe::tools
