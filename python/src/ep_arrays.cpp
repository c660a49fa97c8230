#include "ep_arrays.hpp"

#include <vector>

namespace shmoe::python {
namespace {

struct DType {
  const char* name;
  shmoe_dtype_t code;
  const char* numpy;  // the numpy dtype of the element's bits
};
constexpr DType kDTypes[] = {
    {"bfloat16", SHMOE_DTYPE_BFLOAT16, "int16"},
    {"float16", SHMOE_DTYPE_FLOAT16, "float16"},
    {"float32", SHMOE_DTYPE_FLOAT32, "float32"},
    {"int32", SHMOE_DTYPE_INT32, "int32"},
    {"int64", SHMOE_DTYPE_INT64, "int64"},
    {"uint8", SHMOE_DTYPE_UINT8, "uint8"},
    {"float8_e4m3fn", SHMOE_DTYPE_FLOAT8_E4M3, "uint8"},
    {"bool", SHMOE_DTYPE_BOOL, "bool"},
};

}  // namespace

shmoe_tensor_t Converted::tensor(const py::object& a, const std::string& dtype, const char* param) {
  shmoe_tensor_t t{};
  if (a.is_none()) return t;
  try {
    const DType* d = nullptr;
    for (const DType& k : kDTypes) {
      if (dtype == k.name) d = &k;
    }
    if (d == nullptr) throw Error("dtype " + dtype + " is not one the runtime carries");
    const py::buffer_info info = a.cast<py::buffer>().request(true);
    if (info.ndim > SHMOE_TENSOR_MAX_DIMS) throw Error("it has more than 4 dimensions");
    (void)bytes_of(a.cast<py::buffer>(), param);  // C-contiguous
    t.data = info.ptr;
    t.dtype = d->code;
    t.ndim = static_cast<int>(info.ndim);
    for (int i = 0; i < t.ndim; ++i) {
      t.shape[i] = info.shape[static_cast<std::size_t>(i)];
      t.strides[i] = info.strides[static_cast<std::size_t>(i)] / info.itemsize;
    }
    if (t.data == nullptr) t.data = this;  // an empty array is given, not missing
  } catch (const std::exception& e) {
    note(std::string(param) + " cannot be read: " + e.what());
    t = shmoe_tensor_t{};
  }
  return t;
}

shmoe_tensor_t Converted::tensor(const py::dict& t, const char* name) {
  if (!t.contains(name)) return {};
  const py::tuple pair = t[name].cast<py::tuple>();
  return tensor(pair[0], pair[1].cast<std::string>(), name);
}

int Converted::integer(const py::object& v, const char* name) {
  if (!py::isinstance<py::bool_>(v) && py::isinstance<py::int_>(v)) {
    try {
      return v.cast<int>();
    } catch (const std::exception&) {
    }
  }
  note(std::string(name) + "=" + py::repr(v).cast<std::string>() + " must be an int");
  return 0;
}

shmoe_ep_result_t Converted::handle(const py::object& h) {
  if (h.is_none()) return nullptr;
  try {
    return h.cast<const EpResult&>().get();
  } catch (const std::exception&) {
    note("handle is not the handle a dispatch of this buffer returned");
    return nullptr;
  }
}

py::dict arrays_of(const py::object& owner) {
  shmoe_ep_result_t r = owner.cast<const EpResult&>().get();
  py::dict out;
  for (int i = 0; const char* name = shmoe_ep_result_name(r, i); ++i) {
    shmoe_tensor_t t{};
    shmoe_ep_result_get(r, name, &t);
    const char* numpy = "uint8";
    for (const DType& k : kDTypes) {
      if (k.code == t.dtype) numpy = k.numpy;
    }
    const py::dtype dt(numpy);
    std::vector<py::ssize_t> shape(t.shape, t.shape + t.ndim), strides;
    for (int d = 0; d < t.ndim; ++d) strides.push_back(t.strides[d] * dt.itemsize());
    out[name] = py::array(dt, shape, strides, t.data, owner);
  }
  return out;
}

void bind_ep_result(py::module_& m) {
  py::class_<EpResult>(m, "EpResult");
}

}  // namespace shmoe::python
