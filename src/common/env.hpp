// Reading the environment, with errors that name the variable and the value. shmoe's own
// variables are read through the table in settings.def; this reads the others (PATH, launchers').
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shmoe::env {

std::optional<std::string> get(const char* name);

// The names of the variables set in this process's environment that start with `prefix`.
std::vector<std::string> names_starting_with(std::string_view prefix);

// "512M", "2G", "4096", "1.5G", "64KiB" -> bytes. Throws shmoe::Error naming `what` on bad input.
std::size_t parse_size(std::string_view text, std::string_view what);

// Integer in [min, max]; throws naming `what`, the value and the range.
std::int64_t parse_int(std::string_view text, std::string_view what, std::int64_t min,
                       std::int64_t max);

// A duration given in (possibly fractional) seconds, 0..1e9; 0 means "never" and is returned
// as-is. Throws naming `what` and the value.
std::chrono::milliseconds parse_seconds(std::string_view text, std::string_view what);

// "1", "true", "yes", "on" (any case) are true, anything else false.
bool parse_flag(std::string_view text);

}  // namespace shmoe::env
