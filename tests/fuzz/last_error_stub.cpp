// The per-thread text of the last refused call, which the SHMEM layer keeps in the library
// (src/shmem/api_agree.cpp): the same contract here, so that fuzz_moe_options compiles the
// public configuration check (src/moe/config_c_api.cpp) without the rest of the runtime.
#include <string>

#include "shmem/last_error.hpp"
#include "shmoe/runtime.h"

namespace shmoe {
namespace {
thread_local std::string text;
}  // namespace

void set_last_error(std::string t) {
  text = std::move(t);
}
const std::string& last_error() {
  return text;
}

}  // namespace shmoe

extern "C" const char* shmoe_last_error(void) {
  return shmoe::last_error().c_str();
}
