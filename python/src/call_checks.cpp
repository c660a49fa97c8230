// The argument checks the package's runtimes share (call_checks.hpp).
#include "call_checks.hpp"

#include <fmt/format.h>
#include <shmem.h>

#include <cstddef>
#include <cstring>
#include <limits>

#include "bindings.hpp"
#include "shmoe/runtime.hpp"

namespace shmoe::python {
namespace {

std::string shape_text(const py::buffer_info& a) {
  return fmt::format("[{}]", fmt::join(a.shape, ", "));
}

template <typename T>
long long element(const std::byte* p, std::size_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return static_cast<long long>(v);
}

}  // namespace

Array array_of(const py::object& a, const std::string& dtype, const char* param) {
  return {a.cast<py::buffer>().request(), dtype, param};
}

void Refusal::shape(const py::buffer_info& a, const char* param, std::initializer_list<Dim> dims) {
  if (a.ndim != static_cast<py::ssize_t>(dims.size())) {
    return refuse(
        fmt::format("{} must have {} dimensions, not shape {}", param, dims.size(), shape_text(a)));
  }
  int axis = 0;
  for (const Dim& d : dims) {
    const py::ssize_t got = a.shape[static_cast<std::size_t>(axis)];
    if (d.limit_name != nullptr && got > d.size) {
      return refuse(
          fmt::format("{} has {} rows, more than {}={}", param, got, d.limit_name, d.size));
    }
    if (d.limit_name == nullptr && got != d.size) {
      return refuse(fmt::format("{} has shape {}; dimension {} must be {}", param, shape_text(a),
                                axis, d.size));
    }
    ++axis;
  }
}

void Refusal::settle(bool alone) const {
  if (alone) {
    if (any()) throw Error(why_);
    return;
  }
  agree(SHMEM_TEAM_WORLD, call_.c_str(), why_);
}

void check_range(Refusal& r, const char* name, long long v, long long low) {
  if (v < low) r.refuse(fmt::format("{}={} must be at least {}", name, v, low));
}

void check_payload(Refusal& r, const Array& a, const std::string& dtype,
                   std::initializer_list<Dim> dims) {
  const bool bits = dtype == "bfloat16" && a.dtype == "uint16";
  if (a.dtype != dtype && !bits) {
    r.refuse(fmt::format("{} has dtype {} but the buffer carries {}{}", a.param, a.dtype, dtype,
                         dtype == "bfloat16" ? " (numpy: uint16 bit patterns)" : ""));
  }
  r.shape(a, dims);
}

bool is_integer(const std::string& dtype) {
  return dtype.rfind("int", 0) == 0 || dtype.rfind("uint", 0) == 0;
}

bool is_float(const std::string& dtype) {
  return dtype == "float32" || dtype == "float64" || dtype == "float16" || dtype == "bfloat16";
}

std::vector<std::int32_t> indices_int32(const Array& a) {
  const auto n = static_cast<std::size_t>(a.info.size);
  std::vector<std::int32_t> out(n);
  const auto* p = static_cast<const std::byte*>(a.info.ptr);
  const bool is_signed = a.dtype.rfind("int", 0) == 0;
  for (std::size_t i = 0; i < n; ++i) {
    long long v = 0;
    switch (a.info.itemsize) {
      case 1:
        v = is_signed ? element<std::int8_t>(p, i) : element<std::uint8_t>(p, i);
        break;
      case 2:
        v = is_signed ? element<std::int16_t>(p, i) : element<std::uint16_t>(p, i);
        break;
      case 4:
        v = is_signed ? element<std::int32_t>(p, i) : element<std::uint32_t>(p, i);
        break;
      default:  // 8 bytes; an unsigned value past INT64_MAX reads as negative: out of range
        v = element<std::int64_t>(p, i);
    }
    const bool fits = v >= std::numeric_limits<std::int32_t>::min() &&
                      v <= std::numeric_limits<std::int32_t>::max();
    out[i] = fits ? static_cast<std::int32_t>(v) : std::numeric_limits<std::int32_t>::min();
  }
  return out;
}

}  // namespace shmoe::python
