// How the C API of include/shmoe/moe.h turns the C++ operators' exceptions into status codes and
// the text shmoe_moe_last_error() returns.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <type_traits>

#include "moe/mega_moe.hpp"
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

// Runs f (returning int) and maps a Refused (a refused call) to SHMOE_MOE_REFUSED and any other
// exception to SHMOE_MOE_FAILED, recording the message.
template <typename F>
int guarded(F&& f) {
  try {
    return f();
  } catch (const Refused& e) {
    set_last_error(e.what());
    return SHMOE_MOE_REFUSED;
  } catch (const std::exception& e) {
    set_last_error(e.what());
    return SHMOE_MOE_FAILED;
  }
}

// A null handle or pointer: refused on the calling PE (the handle is needed to reach the others).
inline void require_nonnull(const void* p, const char* fn, const char* param) {
  if (p == nullptr) throw Refused(std::string(fn) + ": " + param + " is NULL");
}

template <typename T>
T& require(T* p, const char* fn, const char* param) {
  require_nonnull(p, fn, param);
  return *p;
}

// The struct_size of a caller's extensible struct (shmoe/moe.h, "Extensible structs"), which must
// be at least `first_size`, the size of the struct's first version (appending fields leaves it).
inline std::size_t caller_size(const void* p, std::size_t first_size, const char* fn,
                               const char* param) {
  require_nonnull(p, fn, param);
  std::size_t size = 0;
  std::memcpy(&size, p, sizeof size);
  if (size < first_size) {
    throw Refused(std::string(fn) + ": " + param + "->struct_size=" + std::to_string(size) +
                  " is less than the struct's first version (" + std::to_string(first_size) +
                  " bytes): set it to sizeof the struct (SHMOE_STRUCT_INIT does)");
  }
  return size;
}

// The caller's struct: its struct_size bytes, the fields beyond taken as 0 (their defaults).
template <typename T>
T read_struct(const T* p, std::size_t first_size, const char* fn, const char* param) {
  const std::size_t size = caller_size(p, first_size, fn, param);
  const auto* bytes = reinterpret_cast<const unsigned char*>(p);
  if (size > sizeof(T) &&
      std::any_of(bytes + sizeof(T), bytes + size, [](unsigned char b) { return b != 0; })) {
    throw Refused(std::string(fn) + ": " + param + "->struct_size=" + std::to_string(size) +
                  " is more than this library's " + std::to_string(sizeof(T)) +
                  " bytes and the fields beyond are set: the caller's header is newer than the "
                  "library");
  }
  T out{};
  std::memcpy(&out, p, std::min(size, sizeof(T)));
  return out;
}

// Writes `value` into the caller's struct, as far as its struct_size reaches.
template <typename T>
void write_struct(T* p, const T& value, std::size_t first_size, const char* fn, const char* param) {
  const std::size_t size = std::min(caller_size(p, first_size, fn, param), sizeof(T));
  constexpr std::size_t skip = sizeof(std::size_t);  // struct_size stays the caller's
  std::memcpy(reinterpret_cast<unsigned char*>(p) + skip,
              reinterpret_cast<const unsigned char*>(&value) + skip, size - skip);
}

// The size of a struct's first version: up to and including `last`'s field.
#define SHMOE_FIRST_SIZE(type, last) (offsetof(type, last) + sizeof(type::last))

// The operator's configuration from the caller's (config_c_api.cpp), refused if its dtype is not
// one of the enum's; checked_moe_config also applies the operator's rules on n_pes PEs (before
// shmem_init too), naming each field as shmoe_moe_config_t spells it.
MoeConfig moe_config_of(const shmoe_moe_config_t* config, const char* fn);
MoeConfig checked_moe_config(const shmoe_moe_config_t* config, int n_pes, const char* fn);
// The same for MegaMoE; fp8_format_of refuses a value that is not one of shmoe_fp8_format_t's.
numeric::Fp8Format fp8_format_of(const shmoe_fp8_format_t& f, const char* fn);
MegaMoEConfig mega_config_of(const shmoe_mega_moe_config_t* config, const char* fn);
MegaMoEConfig checked_mega_config(const shmoe_mega_moe_config_t* config, int n_pes, const char* fn);

}  // namespace shmoe::moe::c_api
