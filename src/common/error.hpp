// Errors that cross layer boundaries inside shmoe. The API layer turns them into a message on
// stderr naming the PE, followed by a non-zero exit, since the C API has no error channel for them.
#pragma once

#include <fmt/format.h>

#include <string>

#include "shmoe/runtime.hpp"  // shmoe::Error: one error type, inside and outside the library

namespace shmoe {

template <typename... Args>
[[nodiscard]] Error make_error(fmt::format_string<Args...> f, Args&&... args) {
  return Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace shmoe
