// How the C API of include/shmoe/moe.h turns the C++ operators' exceptions into status codes and
// the text shmoe_moe_last_error() returns.
#pragma once

#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <type_traits>

#include "moe/moe.hpp"
#include "shmoe/moe.h"

namespace shmoe::moe::c_api {

// A C caller may store any int in an enum of the C API; reading that as the C++ enum type is
// undefined behaviour (UBSan's -fsanitize=enum), so the C API reads the bytes as an integer.
template <typename E>
int raw_enum_value(const E& e) {
  std::underlying_type_t<E> raw;
  static_assert(sizeof raw == sizeof e);
  std::memcpy(&raw, &e, sizeof raw);
  return static_cast<int>(raw);
}

void set_last_error(std::string text);

// Runs f (returning int) and maps a MoeError (a refused call) to SHMOE_MOE_REFUSED and any other
// exception to SHMOE_MOE_FAILED, recording the message.
template <typename F>
int guarded(F&& f) {
  try {
    return f();
  } catch (const MoeError& e) {
    set_last_error(e.what());
    return SHMOE_MOE_REFUSED;
  } catch (const std::exception& e) {
    set_last_error(e.what());
    return SHMOE_MOE_FAILED;
  }
}

// A null handle or pointer: refused on the calling PE (the handle is needed to reach the others).
inline void require_nonnull(const void* p, const char* fn, const char* param) {
  if (p == nullptr) throw MoeError(std::string(fn) + ": " + param + " is NULL");
}

template <typename T>
T& require(T* p, const char* fn, const char* param) {
  require_nonnull(p, fn, param);
  return *p;
}

}  // namespace shmoe::moe::c_api
