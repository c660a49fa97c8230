// What the runtimes of the package's collective objects (moe_runtime.cpp, mega.cpp) share to
// check a call's arguments: the arrays as the package converted them, the first refusal, and the
// agreement that makes it every PE's.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace shmoe::python {

namespace py = pybind11;

// An array argument as the package converted it: its memory (C-contiguous) and its element
// type's name (torch's or numpy's: "bfloat16" for a bfloat16 tensor, whose numpy view holds
// uint16 bit patterns).
struct Array {
  py::buffer_info info;
  std::string dtype;
  const char* param;
};

Array array_of(const py::object& a, const std::string& dtype, const char* param);

// A dimension an array must have: exactly `size`, or with `limit_name` at most `size`.
struct Dim {
  py::ssize_t size;
  const char* limit_name = nullptr;
};

// The first thing wrong with one call's arguments, as the call's message.
class Refusal {
 public:
  explicit Refusal(std::string call) : call_(std::move(call)) {}
  bool any() const { return !why_.empty(); }
  void refuse(const std::string& why) {
    if (why_.empty()) why_ = call_ + ": " + why;
  }
  // Refuses `a` unless its shape is `dims`.
  void shape(const Array& a, std::initializer_list<Dim> dims) { shape(a.info, a.param, dims); }
  void shape(const py::buffer_info& a, const char* param, std::initializer_list<Dim> dims);
  // Every PE's verdict: throws shmoe::Error on every PE when any refused (`alone`: on this PE
  // only, without waiting for the others, as shrink mode's calls do).
  void settle(bool alone) const;

 private:
  std::string call_;
  std::string why_;
};

// name=v must be at least low.
void check_range(Refusal& r, const char* name, long long v, long long low);
// A payload of element type `dtype` ("bfloat16" also takes numpy's uint16 bit patterns).
void check_payload(Refusal& r, const Array& a, const std::string& dtype,
                   std::initializer_list<Dim> dims);
bool is_integer(const std::string& dtype);
bool is_float(const std::string& dtype);
// Integer indices as int32: values no int32 holds become INT32_MIN, which the operators refuse.
std::vector<std::int32_t> indices_int32(const Array& a);

}  // namespace shmoe::python
