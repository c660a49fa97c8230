// The parts of the _shmoe extension module, over shmoe's public API alone (shmem.h,
// shmoe/runtime.hpp, shmoe/moe.hpp; the module links libshmoe.so). Memory crosses the boundary
// as objects with the buffer protocol (numpy arrays, memoryviews), never as integer addresses;
// the package converts torch tensors to numpy views first. The package has converted and
// checked each argument's type and shape; collective calls have agreed (agree()) before they
// get here, so what these functions check is what only the C++ side can see.
#pragma once

#include <pybind11/pybind11.h>
#include <shmem.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "shmoe/moe.h"
#include "shmoe/runtime.hpp"

namespace shmoe::python {

namespace py = pybind11;

// shmoe's one error type (shmoe/runtime.hpp), raised in Python as shmoe.Error (module.cpp
// registers it).
using shmoe::Error;

// A team handle, as Python holds it.
struct TeamHandle {
  shmem_team_t team;
};

// A buffer argument's memory: its bytes, C-contiguous.
struct Bytes {
  std::byte* data;
  std::size_t size;
  template <typename T>
  T* as() const {
    return reinterpret_cast<T*>(data);
  }
};

// The memory of `b` (writable: the call writes it); refuses a non-contiguous or read-only one,
// naming `param`.
Bytes bytes_of(const py::buffer& b, const char* param, bool writable = false);
// The memory of `b`, or null bytes for None.
Bytes bytes_or_null(const py::object& b, const char* param, bool writable = false);
// The address of element `offset` bytes into `b`, which must hold `bytes` more bytes there.
std::byte* element_of(const py::buffer& b, std::size_t offset, std::size_t bytes, bool writable);

// Runs `f` with the GIL released (the calls may wait for other PEs); an exception of the library
// (the operators refuse bad input by throwing, on every PE alike) becomes shmoe.Error.
template <typename F>
auto released(F&& f) -> decltype(f()) {
  py::gil_scoped_release unlocked;
  try {
    return f();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(e.what());
  }
}

// Owns a collective object of the C++ API (shmoe::MoeBuffer, shmoe::MegaMoE) whose
// destruction happens in close(), which the package calls in the same order on every PE; one the
// garbage collector finds still open gives its handle up and leaves it to the process's end,
// rather than destroying it at a moment the other PEs know nothing of.
template <typename T>
class Collective {
 public:
  Collective(std::unique_ptr<T> object, const char* closed)
      : object_(std::move(object)), closed_(closed) {}
  ~Collective() {
    if (object_) (void)object_->release();
  }
  Collective(const Collective&) = delete;
  Collective& operator=(const Collective&) = delete;

  T& get() const {
    if (!object_) throw Error(closed_);
    return *object_;
  }
  void close() {
    released([&] { object_.reset(); });
  }
  // Gives this PE's handle up without the collective close (as the destructor does), for a PE
  // that cannot count on every other PE closing too (shrink mode, where some may have failed):
  // the symmetric memory stays allocated until the process ends.
  void abandon() {
    if (object_) (void)object_->release();
    object_.reset();
  }

 private:
  std::unique_ptr<T> object_;
  const char* closed_;
};

// "e4m3" or "e5m2"; anything else is refused.
shmoe_fp8_format_t fp8_format_named(const std::string& name);

void bind_core(py::module_& m);
void bind_amo(py::module_& m);
void bind_collectives(py::module_& m);
void bind_moe(py::module_& m);
void bind_moe_runtime(py::module_& m);
void bind_mega(py::module_& m);
void bind_elastic(py::module_& m);
void bind_intranode(py::module_& m);
void bind_low_latency(py::module_& m);
// After bind_elastic: PP, AGRS and Engram as methods of _shmoe.ElasticBuffer.
void bind_elastic_primitives(py::module_& m);

}  // namespace shmoe::python
