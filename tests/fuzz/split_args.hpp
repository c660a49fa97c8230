// argv for the command-line fuzzers: the input split at NUL bytes, after a program name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace shmoe::fuzz {

// Bounds the number of arguments so one input cannot spend the whole run on argv bookkeeping.
inline constexpr std::size_t kMaxArgs = 64;

inline std::vector<std::string> split_at_nul(const char* program, const std::uint8_t* data,
                                             std::size_t size) {
  std::vector<std::string> args{program};
  std::string current;
  for (std::size_t i = 0; i < size && args.size() < kMaxArgs; ++i) {
    if (data[i] == 0) {
      args.push_back(current);
      current.clear();
    } else {
      current.push_back(static_cast<char>(data[i]));
    }
  }
  if (!current.empty() && args.size() < kMaxArgs) args.push_back(current);
  return args;
}

// Pointers into `args`, null-terminated, as main() receives them.
inline std::vector<char*> argv_of(std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return argv;
}

}  // namespace shmoe::fuzz
