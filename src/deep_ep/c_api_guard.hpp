// How the C API of the DeepEP runtimes (shmoe/elastic.h, elastic_primitives.h, deep_ep.h) turns
// exceptions into status codes: moe's guarded(), with an agreement's refusal (shmoe::Error,
// raised on every PE) as SHMOE_MOE_REFUSED too.
#pragma once

#include "moe/c_api_guard.hpp"
#include "shmoe/runtime.hpp"

namespace shmoe::deep_ep {

template <typename F>
int guarded(F&& f) {
  return moe::c_api::guarded([&] {
    try {
      return f();
    } catch (const shmoe::Error& e) {
      throw moe::Refused(e.what());
    }
  });
}

}  // namespace shmoe::deep_ep
