// _shmoe.IntranodeBuffer: the runtime of deep_ep.Buffer's normal mode over shmoe/deep_ep.h. Each
// method takes the package's arrays as converted (numpy views of torch tensors with torch's dtype
// names, ep_arrays.hpp) and makes one C call, which checks every argument on every PE; a value
// this binding cannot read becomes this PE's refusal, so the others are refused too.
#include <pybind11/numpy.h>

#include <cstdint>
#include <string>
#include <utility>

#include "bindings.hpp"
#include "ep_arrays.hpp"
#include "shmoe/deep_ep.h"

namespace shmoe::python {
namespace {

class IntranodeRuntime {
 public:
  explicit IntranodeRuntime(int num_max_tokens_per_rank) {
    shmoe_intranode_buffer_config_t c{};
    c.struct_size = sizeof c;
    c.num_max_tokens_per_rank = num_max_tokens_per_rank;
    check(shmoe_intranode_buffer_create(&c, &b_));
  }
  ~IntranodeRuntime() {
    // Dropped without destroy(): the operators stay until the job ends (a collective free here
    // could wait for PEs that never come).
    if (b_ != nullptr) (void)shmoe_intranode_buffer_abandon(b_);
  }

  void destroy() {
    released([&] { return check(shmoe_intranode_buffer_destroy(std::exchange(b_, nullptr))); });
  }
  void abandon() { check(shmoe_intranode_buffer_abandon(std::exchange(b_, nullptr))); }
  // (dispatches whose recv_x is in a receive block, dispatches that copied it out)
  std::pair<std::int64_t, std::int64_t> result_counts() const {
    std::int64_t in_blocks = 0, copied = 0;
    check(shmoe_intranode_buffer_result_counts(get(), &in_blocks, &copied));
    return {in_blocks, copied};
  }

  py::dict get_dispatch_layout(const py::dict& t, const py::object& num_experts) {
    Converted c;
    shmoe_intranode_layout_args_t a{};
    a.struct_size = sizeof a;
    a.topk_idx = c.tensor(t, "topk_idx");
    a.num_experts = c.integer(num_experts, "num_experts");
    a.refusal = c.refusal();
    shmoe_ep_result_t r = nullptr;
    check(shmoe_intranode_get_dispatch_layout(get(), &a, &r));
    return arrays_of(py::cast(std::make_unique<EpResult>(r)));
  }

  py::tuple dispatch(const py::dict& t, const py::object& handle,
                     const py::object& expert_alignment, const py::object& num_worst_tokens) {
    Converted c;
    shmoe_intranode_dispatch_args_t a{};
    a.struct_size = sizeof a;
    a.x = c.tensor(t, "x");
    a.x_scales = c.tensor(t, "x_scales");
    a.num_tokens_per_rank = c.tensor(t, "num_tokens_per_rank");
    a.num_tokens_per_rdma_rank = c.tensor(t, "num_tokens_per_rdma_rank");
    a.is_token_in_rank = c.tensor(t, "is_token_in_rank");
    a.num_tokens_per_expert = c.tensor(t, "num_tokens_per_expert");
    a.topk_idx = c.tensor(t, "topk_idx");
    a.topk_weights = c.tensor(t, "topk_weights");
    a.handle = c.handle(handle);
    a.expert_alignment = c.integer(expert_alignment, "expert_alignment");
    a.num_worst_tokens = c.integer(num_worst_tokens, "num_worst_tokens");
    a.refusal = c.refusal();
    shmoe_ep_result_t r = nullptr;
    released([&] { return check(shmoe_intranode_dispatch(get(), &a, &r)); });
    py::object owner = py::cast(std::make_unique<EpResult>(r));
    return py::make_tuple(arrays_of(owner), owner);
  }

  // bias: None, a tensor or a tuple of at most two (converted by the package).
  py::dict combine(const py::dict& t, const py::object& handle, int num_biases) {
    Converted c;
    shmoe_intranode_combine_args_t a{};
    a.struct_size = sizeof a;
    a.x = c.tensor(t, "x");
    a.topk_weights = c.tensor(t, "topk_weights");
    a.bias0 = c.tensor(t, "bias0");
    a.bias1 = c.tensor(t, "bias1");
    if (num_biases > 2) {
      c.note("bias is at most two tensors, not " + std::to_string(num_biases));
    }
    a.handle = c.handle(handle);
    a.refusal = c.refusal();
    shmoe_ep_result_t r = nullptr;
    released([&] { return check(shmoe_intranode_combine(get(), &a, &r)); });
    return arrays_of(py::cast(std::make_unique<EpResult>(r)));
  }

 private:
  shmoe_intranode_buffer_t get() const {
    if (b_ == nullptr) throw Error("IntranodeBuffer: the buffer was destroyed");
    return b_;
  }

  shmoe_intranode_buffer_t b_ = nullptr;
};

}  // namespace

void bind_intranode(py::module_& m) {
  py::class_<IntranodeRuntime>(m, "IntranodeBuffer")
      .def(py::init<int>(), py::arg("num_max_tokens_per_rank") = 0)
      .def("destroy", &IntranodeRuntime::destroy)
      .def("abandon", &IntranodeRuntime::abandon)
      .def("result_counts", &IntranodeRuntime::result_counts)
      .def("get_dispatch_layout", &IntranodeRuntime::get_dispatch_layout, py::arg("tensors"),
           py::arg("num_experts"))
      .def("dispatch", &IntranodeRuntime::dispatch, py::arg("tensors"), py::arg("handle"),
           py::arg("expert_alignment"), py::arg("num_worst_tokens"))
      .def("combine", &IntranodeRuntime::combine, py::arg("tensors"), py::arg("handle"),
           py::arg("num_biases"));
}

}  // namespace shmoe::python
