// _shmoe: the compiled part of the Python package shmoe.
#include "bindings.hpp"

PYBIND11_MODULE(_shmoe, m) {
  namespace py = shmoe::python::py;
  m.doc() = "shmoe's C and C++ API for the Python package shmoe (use the package, not this module)";
  py::register_exception<shmoe::python::Refused>(m, "Error", PyExc_RuntimeError);
  shmoe::python::bind_core(m);
  shmoe::python::bind_amo(m);
  shmoe::python::bind_collectives(m);
  shmoe::python::bind_moe(m);
  shmoe::python::bind_mega(m);
}
