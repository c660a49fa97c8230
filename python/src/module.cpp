// _shmoe: the compiled part of the Python package shmoe.
#include "bindings.hpp"

namespace shmoe::python {

Bytes bytes_of(const py::buffer& b, const char* param, bool writable) {
  const py::buffer_info info = b.request(writable);
  py::ssize_t expected = info.itemsize;
  for (py::ssize_t d = info.ndim - 1; d >= 0; --d) {
    if (info.shape[d] != 1 && info.strides[d] != expected) {
      throw Error(std::string(param) + " must be C-contiguous");
    }
    expected *= info.shape[d];
  }
  return {static_cast<std::byte*>(info.ptr), static_cast<std::size_t>(info.size * info.itemsize)};
}

Bytes bytes_or_null(const py::object& b, const char* param, bool writable) {
  if (b.is_none()) return {nullptr, 0};
  return bytes_of(b.cast<py::buffer>(), param, writable);
}

std::byte* element_of(const py::buffer& b, std::size_t offset, std::size_t bytes, bool writable) {
  const Bytes all = bytes_of(b, "a", writable);
  if (offset > all.size || bytes > all.size - offset) {
    throw Error("element at byte " + std::to_string(offset) + " lies outside the array's " +
                std::to_string(all.size) + " bytes");
  }
  return all.data + offset;
}

shmoe_fp8_format_t fp8_format_named(const std::string& name) {
  if (name == "e4m3") return SHMOE_FP8_E4M3;
  if (name == "e5m2") return SHMOE_FP8_E5M2;
  throw Error("FP8 format '" + name + "' is not one of e4m3, e5m2");
}

}  // namespace shmoe::python

PYBIND11_MODULE(_shmoe, m) {
  namespace py = shmoe::python::py;
  m.doc() = "shmoe's C and C++ API for the Python package shmoe (use the package, not this module)";
  py::register_exception<shmoe::Error>(m, "Error", PyExc_RuntimeError);
  shmoe::python::bind_core(m);
  shmoe::python::bind_amo(m);
  shmoe::python::bind_collectives(m);
  shmoe::python::bind_moe(m);
  shmoe::python::bind_moe_runtime(m);
  shmoe::python::bind_mega(m);
  shmoe::python::bind_elastic(m);
  shmoe::python::bind_intranode(m);
  shmoe::python::bind_low_latency(m);
  shmoe::python::bind_elastic_primitives(m);
}
