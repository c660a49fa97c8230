// _shmoe.LowLatencyBuffer: the runtime of deep_ep.Buffer's low-latency mode over shmoe/deep_ep.h.
// Each method takes the package's arrays as converted (numpy views of torch tensors with torch's
// dtype names, ep_arrays.hpp) and makes one C call, which checks every argument on every PE; a
// value this binding cannot read becomes this PE's refusal, so the others are refused too.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "ep_arrays.hpp"
#include "shmoe/deep_ep.h"

namespace shmoe::python {
namespace {

class LowLatencyRuntime {
 public:
  // shrink_timeout_ms > 0: shrink mode, with the operators of `hinted_shapes` ((max tokens,
  // hidden, ranks, experts) tuples) made now, collectively.
  LowLatencyRuntime(int shrink_timeout_ms, const std::vector<std::array<int, 4>>& hinted_shapes) {
    std::vector<std::int32_t> hinted;
    for (const auto& shape : hinted_shapes) hinted.insert(hinted.end(), shape.begin(), shape.end());
    shmoe_low_latency_buffer_config_t c{};
    c.struct_size = sizeof c;
    c.shrink_timeout_ms = shrink_timeout_ms;
    c.hinted_shapes = hinted.data();
    c.num_hinted_shapes = static_cast<int>(hinted_shapes.size());
    released([&] { return check(shmoe_low_latency_buffer_create(&c, &b_)); });
  }
  ~LowLatencyRuntime() {
    // Dropped without destroy(): the operators stay until the job ends.
    if (b_ != nullptr) (void)shmoe_low_latency_buffer_abandon(b_);
  }

  void destroy() {
    released([&] { return check(shmoe_low_latency_buffer_destroy(std::exchange(b_, nullptr))); });
  }
  void abandon() { check(shmoe_low_latency_buffer_abandon(std::exchange(b_, nullptr))); }
  // (dispatches whose recv_x is in a receive block, dispatches that copied it out)
  std::pair<std::int64_t, std::int64_t> result_counts() const {
    std::int64_t in_blocks = 0, copied = 0;
    check(shmoe_low_latency_buffer_result_counts(get(), &in_blocks, &copied));
    return {in_blocks, copied};
  }

  py::tuple dispatch(const py::dict& t, const py::object& num_max_dispatch_tokens_per_rank,
                     const py::object& num_experts, bool use_fp8, bool round_scale,
                     bool use_ue8m0) {
    Converted c;
    shmoe_low_latency_dispatch_args_t a{};
    a.struct_size = sizeof a;
    a.x = c.tensor(t, "x");
    a.topk_idx = c.tensor(t, "topk_idx");
    a.cumulative_local_expert_recv_stats = c.tensor(t, "cumulative_local_expert_recv_stats");
    a.dispatch_wait_recv_cost_stats = c.tensor(t, "dispatch_wait_recv_cost_stats");
    a.num_max_dispatch_tokens_per_rank =
        c.integer(num_max_dispatch_tokens_per_rank, "num_max_dispatch_tokens_per_rank");
    a.num_experts = c.integer(num_experts, "num_experts");
    a.use_fp8 = use_fp8 ? 1 : 0;
    a.round_scale = round_scale ? 1 : 0;
    a.use_ue8m0 = use_ue8m0 ? 1 : 0;
    a.refusal = c.refusal();
    shmoe_ep_result_t r = nullptr;
    released([&] { return check(shmoe_low_latency_dispatch(get(), &a, &r)); });
    py::object owner = py::cast(std::make_unique<EpResult>(r));
    return py::make_tuple(arrays_of(owner), owner);
  }

  py::dict combine(const py::dict& t, const py::object& handle, bool zero_copy, bool use_logfmt) {
    Converted c;
    shmoe_low_latency_combine_args_t a{};
    a.struct_size = sizeof a;
    a.x = c.tensor(t, "x");
    a.topk_idx = c.tensor(t, "topk_idx");
    a.topk_weights = c.tensor(t, "topk_weights");
    a.out = c.tensor(t, "out");
    a.combine_wait_recv_cost_stats = c.tensor(t, "combine_wait_recv_cost_stats");
    a.handle = c.handle(handle);
    a.zero_copy = zero_copy ? 1 : 0;
    a.use_logfmt = use_logfmt ? 1 : 0;
    a.refusal = c.refusal();
    shmoe_ep_result_t r = nullptr;
    released([&] { return check(shmoe_low_latency_combine(get(), &a, &r)); });
    return arrays_of(py::cast(std::make_unique<EpResult>(r)));
  }

  // int16 [local experts, slots, hidden] (bfloat16 bits) over the buffer's memory; `self` keeps
  // the runtime alive while the array lives.
  py::array next_combine_buffer(const py::object& self, const py::object& handle) {
    Converted c;
    shmoe_ep_result_t h = c.handle(handle);
    if (c.refusal() != nullptr) {
      throw Error(std::string("deep_ep.Buffer.get_next_low_latency_combine_buffer: ") + c.refusal(),
                  SHMOE_MOE_REFUSED);
    }
    shmoe_tensor_t t{};
    check(shmoe_low_latency_get_next_combine_buffer(get(), h, &t));
    return py::array(py::dtype("int16"), {t.shape[0], t.shape[1], t.shape[2]}, t.data, self);
  }

  void update_mask(const py::object& rank_to_mask, bool mask) {
    Converted c;
    const int rank = c.integer(rank_to_mask, "rank_to_mask");
    if (c.refusal() != nullptr) {
      throw Error(std::string("deep_ep.Buffer.low_latency_update_mask_buffer: ") + c.refusal(),
                  SHMOE_MOE_REFUSED);
    }
    check(shmoe_low_latency_update_mask(get(), rank, mask ? 1 : 0));
  }
  void query_mask(const py::dict& t) {
    Converted c;
    const shmoe_tensor_t mask_status = c.tensor(t, "mask_status");
    if (c.refusal() != nullptr) {
      throw Error(std::string("deep_ep.Buffer.low_latency_query_mask_buffer: ") + c.refusal(),
                  SHMOE_MOE_REFUSED);
    }
    check(shmoe_low_latency_query_mask(get(), mask_status));
  }
  void clean_mask() { check(shmoe_low_latency_clean_mask(get())); }

  void clean(const py::object& m, const py::object& h, const py::object& e) {
    Converted c;
    const int max_tokens = c.integer(m, "num_max_dispatch_tokens_per_rank");
    const int hidden = c.integer(h, "hidden");
    const int experts = c.integer(e, "num_experts");
    released([&] {
      return check(shmoe_low_latency_clean(get(), max_tokens, hidden, experts, c.refusal()));
    });
  }

 private:
  shmoe_low_latency_buffer_t get() const {
    if (b_ == nullptr) throw Error("LowLatencyBuffer: the buffer was destroyed");
    return b_;
  }

  shmoe_low_latency_buffer_t b_ = nullptr;
};

}  // namespace

void bind_low_latency(py::module_& m) {
  m.def("shrink_timeout_ms", [](const std::optional<std::string>& text) {
    int ms = 0;
    check(shmoe_low_latency_shrink_timeout_ms(text ? text->c_str() : nullptr, &ms));
    return ms;
  });
  py::class_<LowLatencyRuntime>(m, "LowLatencyBuffer")
      .def(py::init<int, const std::vector<std::array<int, 4>>&>(),
           py::arg("shrink_timeout_ms") = 0,
           py::arg("hinted_shapes") = std::vector<std::array<int, 4>>{})
      .def("update_mask", &LowLatencyRuntime::update_mask, py::arg("rank_to_mask"), py::arg("mask"))
      .def("query_mask", &LowLatencyRuntime::query_mask, py::arg("tensors"))
      .def("clean_mask", &LowLatencyRuntime::clean_mask)
      .def("destroy", &LowLatencyRuntime::destroy)
      .def("abandon", &LowLatencyRuntime::abandon)
      .def("result_counts", &LowLatencyRuntime::result_counts)
      .def("dispatch", &LowLatencyRuntime::dispatch, py::arg("tensors"),
           py::arg("num_max_dispatch_tokens_per_rank"), py::arg("num_experts"), py::arg("use_fp8"),
           py::arg("round_scale"), py::arg("use_ue8m0"))
      .def("combine", &LowLatencyRuntime::combine, py::arg("tensors"), py::arg("handle"),
           py::arg("zero_copy"), py::arg("use_logfmt"))
      .def(
          "next_combine_buffer",
          [](const py::object& self, const py::object& handle) {
            return self.cast<LowLatencyRuntime&>().next_combine_buffer(self, handle);
          },
          py::arg("handle"))
      .def("clean", &LowLatencyRuntime::clean, py::arg("num_max_dispatch_tokens_per_rank"),
           py::arg("hidden"), py::arg("num_experts"));
}

}  // namespace shmoe::python
