// What the runtimes of deep_ep (elastic.cpp) share to pass arrays through shmoe/tensor.h: the
// package's converted arrays as C tensors (a PE whose argument cannot be read refuses the call,
// joining it, so no PE is left waiting), and a call's result as numpy arrays that keep it alive.
#pragma once

#include <pybind11/numpy.h>

#include <string>

#include "bindings.hpp"
#include "shmoe/elastic.h"
#include "shmoe/tensor.h"

namespace shmoe::python {

// A call's result, released when the last array over it and the package's handle are gone.
class EpResult {
 public:
  explicit EpResult(shmoe_ep_result_t r) : r_(r) {}
  ~EpResult() { shmoe_ep_result_release(r_); }
  EpResult(const EpResult&) = delete;
  EpResult& operator=(const EpResult&) = delete;
  shmoe_ep_result_t get() const { return r_; }

 private:
  shmoe_ep_result_t r_;
};

// The call's arguments as C tensors; the first that cannot be read becomes the refusal.
class Converted {
 public:
  // a: None (not given) or an array with the torch dtype name `dtype`.
  shmoe_tensor_t tensor(const py::object& a, const std::string& dtype, const char* param);
  // t[name] = (array, dtype name), or not given when t has no `name`.
  shmoe_tensor_t tensor(const py::dict& t, const char* name);
  // v as an int (not a bool), or 0 with the refusal noted.
  int integer(const py::object& v, const char* name);
  // The result handle `h` (an EpResult) or None.
  shmoe_ep_result_t handle(const py::object& h);
  const char* refusal() const { return refusal_.empty() ? nullptr : refusal_.c_str(); }
  void note(const std::string& why) {
    if (refusal_.empty()) refusal_ = why;
  }

 private:
  std::string refusal_;
};

// The result's arrays by name, each a numpy array keeping `owner` (an EpResult) alive.
py::dict arrays_of(const py::object& owner);

void bind_ep_result(py::module_& m);

// `status` of a runtime's C call: returned when OK, else shmoe.Error with the call's text.
inline int check(int status) {
  if (status != SHMOE_MOE_OK) throw Error(shmoe_last_error(), status);
  return status;
}

// The C handle of a _shmoe.ElasticBuffer (elastic.cpp); refuses a destroyed one.
shmoe_elastic_buffer_t elastic_buffer_of(const py::object& runtime);

}  // namespace shmoe::python
