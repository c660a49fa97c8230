// _shmoe.ElasticBuffer: the runtime of deep_ep.ElasticBuffer over shmoe/elastic.h. Each method
// takes the package's arrays as converted (numpy views of torch tensors with torch's dtype names)
// and makes one C call, which checks every argument on every PE; an argument this file cannot
// even read joins the call as the PE's refusal, so no PE is left waiting. Results come back as
// numpy arrays over the result's memory, each keeping the result (an _shmoe.EpResult) alive.
#include "shmoe/elastic.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <utility>

#include "bindings.hpp"

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

// A result of a call, released when the last array over it and the package's handle are gone.
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
  shmoe_tensor_t tensor(const py::object& a, const std::string& dtype, const char* param) {
    shmoe_tensor_t t{};
    if (a.is_none()) return t;
    try {
      const DType* d = nullptr;
      for (const DType& k : kDTypes) {
        if (dtype == k.name) d = &k;
      }
      if (d == nullptr) throw Error("dtype " + dtype + " is not one the ElasticBuffer carries");
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
      if (refusal_.empty()) refusal_ = std::string(param) + " cannot be read: " + e.what();
    }
    return t;
  }
  const char* refusal() const { return refusal_.empty() ? nullptr : refusal_.c_str(); }
  void note(const std::string& why) {
    if (refusal_.empty()) refusal_ = why;
  }

 private:
  std::string refusal_;
};

shmoe_ep_result_t handle_of(const py::object& h, Converted& c) {
  if (h.is_none()) return nullptr;
  try {
    return h.cast<const EpResult&>().get();
  } catch (const std::exception&) {
    c.note("handle is not the handle a dispatch of an ElasticBuffer returned");
    return nullptr;
  }
}

// The result's arrays by name, each a numpy array keeping `owner` alive.
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

int check(int status) {
  if (status != SHMOE_MOE_OK) throw Error(shmoe_last_error(), status);
  return status;
}

class ElasticRuntime {
 public:
  explicit ElasticRuntime(const shmoe_elastic_buffer_config_t& c) {
    released([&] { return check(shmoe_elastic_buffer_create(&c, &b_)); });
  }
  ~ElasticRuntime() {
    // Dropped without destroy(): the memory stays until the job ends (a collective free here
    // could wait for PEs that never come).
  }

  void destroy() {
    released([&] { return check(shmoe_elastic_buffer_destroy(std::exchange(b_, nullptr))); });
  }

  std::pair<int, int> domain_size(bool logical) const {
    int s[2] = {0, 0};
    check(shmoe_elastic_buffer_domain_size(get(), logical ? 1 : 0, s));
    return {s[0], s[1]};
  }

  py::tuple dispatch(const py::dict& t, const py::object& handle, int num_experts,
                     int num_max_tokens_per_rank, int expert_alignment, bool do_cpu_sync,
                     bool do_expand, bool do_zero_padding, bool col_major_sf, bool do_handle_copy) {
    Converted c;
    shmoe_elastic_dispatch_args_t a{};
    a.struct_size = sizeof a;
    a.x = tensor(c, t, "x");
    a.sf = tensor(c, t, "sf");
    a.topk_idx = tensor(c, t, "topk_idx");
    a.topk_weights = tensor(c, t, "topk_weights");
    a.cumulative_local_expert_recv_stats = tensor(c, t, "cumulative_local_expert_recv_stats");
    a.handle = handle_of(handle, c);
    a.num_experts = num_experts;
    a.num_max_tokens_per_rank = num_max_tokens_per_rank;
    a.expert_alignment = expert_alignment;
    a.do_cpu_sync = do_cpu_sync;
    a.do_expand = do_expand;
    a.do_zero_padding = do_zero_padding;
    a.use_tma_aligned_col_major_sf = col_major_sf;
    a.do_handle_copy = do_handle_copy;
    a.refusal = c.refusal();
    shmoe_ep_result_t r = nullptr;
    released([&] { return check(shmoe_elastic_dispatch(get(), &a, &r)); });
    py::object owner = py::cast(std::make_unique<EpResult>(r));
    return py::make_tuple(arrays_of(owner), owner);
  }

  py::dict combine(const py::dict& t, const py::object& handle) {
    Converted c;
    shmoe_elastic_combine_args_t a{};
    a.struct_size = sizeof a;
    a.x = tensor(c, t, "x");
    a.topk_weights = tensor(c, t, "topk_weights");
    a.bias0 = tensor(c, t, "bias0");
    a.bias1 = tensor(c, t, "bias1");
    a.handle = handle_of(handle, c);
    a.refusal = c.refusal();
    shmoe_ep_result_t r = nullptr;
    released([&] { return check(shmoe_elastic_combine(get(), &a, &r)); });
    return arrays_of(py::cast(std::make_unique<EpResult>(r)));
  }

 private:
  shmoe_elastic_buffer_t get() const {
    if (b_ == nullptr) throw Error("ElasticBuffer: the buffer was destroyed");
    return b_;
  }
  // t[name] = (array, dtype name) or absent.
  static shmoe_tensor_t tensor(Converted& c, const py::dict& t, const char* name) {
    if (!t.contains(name)) return {};
    const py::tuple pair = t[name].cast<py::tuple>();
    return c.tensor(pair[0], pair[1].cast<std::string>(), name);
  }

  shmoe_elastic_buffer_t b_ = nullptr;
};

shmoe_elastic_buffer_config_t config_of(std::uint64_t num_bytes, int tokens, int hidden, int topk,
                                        bool fp8, bool hybrid, bool multiple, bool deterministic) {
  shmoe_elastic_buffer_config_t c{};
  c.struct_size = sizeof c;
  c.num_bytes = num_bytes;
  c.num_max_tokens_per_rank = tokens;
  c.hidden = hidden;
  c.num_topk = topk;
  c.use_fp8_dispatch = fp8;
  c.allow_hybrid_mode = hybrid;
  c.allow_multiple_reduction = multiple;
  c.deterministic = deterministic;
  return c;
}

}  // namespace

void bind_elastic(py::module_& m) {
  py::class_<EpResult>(m, "EpResult");
  py::class_<ElasticRuntime>(m, "ElasticBuffer")
      .def(py::init([](std::uint64_t num_bytes, int tokens, int hidden, int topk, bool fp8,
                       bool hybrid, bool multiple, bool deterministic) {
             return std::make_unique<ElasticRuntime>(
                 config_of(num_bytes, tokens, hidden, topk, fp8, hybrid, multiple, deterministic));
           }),
           py::arg("num_bytes"), py::arg("num_max_tokens_per_rank"), py::arg("hidden"),
           py::arg("num_topk"), py::arg("use_fp8_dispatch"), py::arg("allow_hybrid_mode"),
           py::arg("allow_multiple_reduction"), py::arg("deterministic"))
      .def_static(
          "size_hint",
          [](int num_ranks, int tokens, int hidden, int topk, bool fp8) {
            const auto c = config_of(0, tokens, hidden, topk, fp8, true, true, false);
            std::uint64_t bytes = 0;
            check(shmoe_elastic_buffer_size_hint(&c, num_ranks, &bytes));
            return bytes;
          },
          py::arg("num_ranks"), py::arg("num_max_tokens_per_rank"), py::arg("hidden"),
          py::arg("num_topk"), py::arg("use_fp8_dispatch"))
      .def("destroy", &ElasticRuntime::destroy)
      .def("domain_size", &ElasticRuntime::domain_size, py::arg("logical"))
      .def("dispatch", &ElasticRuntime::dispatch, py::arg("tensors"), py::arg("handle"),
           py::arg("num_experts"), py::arg("num_max_tokens_per_rank"), py::arg("expert_alignment"),
           py::arg("do_cpu_sync"), py::arg("do_expand"), py::arg("do_zero_padding"),
           py::arg("use_tma_aligned_col_major_sf"), py::arg("do_handle_copy"))
      .def("combine", &ElasticRuntime::combine, py::arg("tensors"), py::arg("handle"));
}

}  // namespace shmoe::python
