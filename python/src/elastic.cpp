// _shmoe.ElasticBuffer: the runtime of deep_ep.ElasticBuffer over shmoe/elastic.h. Each method
// takes the package's arrays as converted (numpy views of torch tensors with torch's dtype names,
// ep_arrays.hpp) and makes one C call, which checks every argument on every PE.
#include "shmoe/elastic.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <utility>

#include "bindings.hpp"
#include "ep_arrays.hpp"

namespace shmoe::python {
namespace {

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

  // The C handle, for the primitives' methods (elastic_primitives.cpp).
  shmoe_elastic_buffer_t handle() const { return get(); }

  std::pair<int, int> domain_size(bool logical) const {
    int s[2] = {0, 0};
    check(shmoe_elastic_buffer_domain_size(get(), logical ? 1 : 0, s));
    return {s[0], s[1]};
  }

  std::pair<std::int64_t, std::int64_t> result_counts() const {
    std::int64_t in_blocks = 0, copied = 0;
    check(shmoe_elastic_buffer_result_counts(get(), &in_blocks, &copied));
    return {in_blocks, copied};
  }

  py::tuple dispatch(const py::dict& t, const py::object& handle, int num_experts,
                     int num_max_tokens_per_rank, int expert_alignment, bool do_cpu_sync,
                     bool do_expand, bool do_zero_padding, bool col_major_sf, bool do_handle_copy) {
    Converted c;
    shmoe_elastic_dispatch_args_t a{};
    a.struct_size = sizeof a;
    a.x = c.tensor(t, "x");
    a.sf = c.tensor(t, "sf");
    a.topk_idx = c.tensor(t, "topk_idx");
    a.topk_weights = c.tensor(t, "topk_weights");
    a.cumulative_local_expert_recv_stats = c.tensor(t, "cumulative_local_expert_recv_stats");
    a.handle = c.handle(handle);
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
    a.x = c.tensor(t, "x");
    a.topk_weights = c.tensor(t, "topk_weights");
    a.bias0 = c.tensor(t, "bias0");
    a.bias1 = c.tensor(t, "bias1");
    a.handle = c.handle(handle);
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

shmoe_elastic_buffer_t elastic_buffer_of(const py::object& runtime) {
  return runtime.cast<const ElasticRuntime&>().handle();
}

void bind_elastic(py::module_& m) {
  bind_ep_result(m);
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
      .def_static(
          "heap_size",
          [](int num_ranks, std::uint64_t num_bytes, int tokens, int hidden, int topk, bool fp8) {
            const auto c = config_of(num_bytes, tokens, hidden, topk, fp8, true, true, false);
            std::uint64_t bytes = 0;
            check(shmoe_elastic_buffer_heap_size(&c, num_ranks, &bytes));
            return bytes;
          },
          py::arg("num_ranks"), py::arg("num_bytes"), py::arg("num_max_tokens_per_rank"),
          py::arg("hidden"), py::arg("num_topk"), py::arg("use_fp8_dispatch"))
      .def("destroy", &ElasticRuntime::destroy)
      .def("domain_size", &ElasticRuntime::domain_size, py::arg("logical"))
      .def("result_counts", &ElasticRuntime::result_counts)
      .def("dispatch", &ElasticRuntime::dispatch, py::arg("tensors"), py::arg("handle"),
           py::arg("num_experts"), py::arg("num_max_tokens_per_rank"), py::arg("expert_alignment"),
           py::arg("do_cpu_sync"), py::arg("do_expand"), py::arg("do_zero_padding"),
           py::arg("use_tma_aligned_col_major_sf"), py::arg("do_handle_copy"))
      .def("combine", &ElasticRuntime::combine, py::arg("tensors"), py::arg("handle"));
}

}  // namespace shmoe::python
