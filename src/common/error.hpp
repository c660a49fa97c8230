// Errors that cross layer boundaries inside shmoe. The API layer turns them into a message on
// stderr naming the PE, followed by a non-zero exit, since the C API has no error channel for them.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace shmoe {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <typename... Args>
[[nodiscard]] Error make_error(fmt::format_string<Args...> f, Args&&... args) {
  return Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace shmoe
