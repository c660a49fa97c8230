// Reading configuration from the environment, with errors that name the variable and the value.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace shmoe::env {

std::optional<std::string> get(const char* name);

// "512M", "2G", "4096", "1.5G", "64KiB" -> bytes. Throws shmoe::Error naming `what` on bad input.
std::size_t parse_size(std::string_view text, std::string_view what);

// Integer in [min, max]; throws naming `what`, the value and the range.
std::int64_t parse_int(std::string_view text, std::string_view what, std::int64_t min,
                       std::int64_t max);

std::size_t size_or(const char* name, std::size_t fallback);
std::int64_t int_or(const char* name, std::int64_t fallback, std::int64_t min, std::int64_t max);
bool flag(const char* name);  // "1", "true", "yes", "on" (any case)

// A duration given in (possibly fractional) seconds; 0 means "never" and is returned as-is.
std::chrono::milliseconds seconds_or(const char* name, double fallback_seconds);

}  // namespace shmoe::env
