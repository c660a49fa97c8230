// The parts of the _shmoe extension module. Each registers its functions on the module. The
// Python package (python/shmoe) checks every argument before it calls them (symmetric memory,
// PE ranges, sizes, element types), so these functions take plain addresses and sizes.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "numeric/fp8.hpp"

namespace shmoe::python {

namespace py = pybind11;

// Memory addresses cross the boundary as integers.
using Address = std::uintptr_t;

template <typename T>
T* at(Address a) {
  return reinterpret_cast<T*>(a);
}

// Raised in Python as shmoe.Error (module.cpp registers it).
class Refused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs `f` with the GIL released (the calls may wait for other PEs); an exception of the library
// (the MoE operators refuse bad input by throwing, on every PE alike) becomes shmoe.Error.
template <typename F>
auto released(F&& f) -> decltype(f()) {
  py::gil_scoped_release unlocked;
  try {
    return f();
  } catch (const std::exception& e) {
    throw Refused(e.what());
  }
}

// "e4m3" or "e5m2"; anything else is refused.
numeric::Fp8Format fp8_format_named(const std::string& name);

void bind_core(py::module_& m);
void bind_amo(py::module_& m);
void bind_collectives(py::module_& m);
void bind_moe(py::module_& m);
void bind_mega(py::module_& m);

}  // namespace shmoe::python
