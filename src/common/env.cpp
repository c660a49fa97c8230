#include "common/env.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "common/error.hpp"

namespace shmoe::env {

std::optional<std::string> get(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::vector<std::string> names_starting_with(std::string_view prefix) {
  std::vector<std::string> names;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    if (!text.starts_with(prefix)) continue;
    names.emplace_back(text.substr(0, text.find('=')));
  }
  return names;
}

std::size_t parse_size(std::string_view text, std::string_view what) {
  std::string s(text);
  s.erase(std::remove_if(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); }),
          s.end());
  char* end = nullptr;
  errno = 0;
  double number = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || errno != 0 || !(number >= 0) || !std::isfinite(number)) {
    throw make_error("{}='{}' is not a size (expected e.g. 4096, 512M, 2G)", what, text);
  }
  // To the end of the text, not to its first NUL: "64M" followed by a NUL and more is not a size.
  std::string suffix(s, static_cast<std::size_t>(end - s.c_str()));
  std::transform(suffix.begin(), suffix.end(), suffix.begin(),
                 [](unsigned char c) { return std::toupper(c); });
  double scale = 1;
  if (suffix.empty() || suffix == "B") {
    scale = 1;
  } else if (suffix == "K" || suffix == "KB" || suffix == "KIB") {
    scale = 1024.0;
  } else if (suffix == "M" || suffix == "MB" || suffix == "MIB") {
    scale = 1024.0 * 1024;
  } else if (suffix == "G" || suffix == "GB" || suffix == "GIB") {
    scale = 1024.0 * 1024 * 1024;
  } else if (suffix == "T" || suffix == "TB" || suffix == "TIB") {
    scale = 1024.0 * 1024 * 1024 * 1024;
  } else {
    throw make_error("{}='{}' has an unknown unit '{}' (allowed: K, M, G, T)", what, text,
                     std::string_view(end, suffix.size()));
  }
  double bytes = number * scale;
  // Compared with 2^63 itself, which a double holds exactly: SIZE_MAX / 2 = 2^63 - 1 as a double
  // rounds up to 2^63, and "bytes > that" let 2^63 through (found by fuzz_parse).
  constexpr double kTooLarge = static_cast<double>(std::numeric_limits<std::size_t>::max() / 2 + 1);
  if (bytes >= kTooLarge) {
    throw make_error("{}='{}' is too large", what, text);
  }
  return static_cast<std::size_t>(bytes);
}

std::int64_t parse_int(std::string_view text, std::string_view what, std::int64_t min,
                       std::int64_t max) {
  std::int64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    throw make_error("{}='{}' is not an integer (allowed range {}..{})", what, text, min, max);
  }
  if (value < min || value > max) {
    throw make_error("{}={} is out of range (allowed {}..{})", what, value, min, max);
  }
  return value;
}

std::chrono::milliseconds parse_seconds(std::string_view text, std::string_view what) {
  const std::string s(text);
  char* end = nullptr;
  const double seconds = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || !(seconds >= 0) || seconds > 1e9) {
    throw make_error("{}='{}' is not a duration in seconds (allowed 0..1e9, 0 = never)", what, s);
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0));
}

bool parse_flag(std::string_view text) {
  std::string s(text);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s == "1" || s == "true" || s == "yes" || s == "on";
}

}  // namespace shmoe::env
