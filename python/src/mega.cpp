// The MegaMoE layer (shmoe::MegaMoE of shmoe/moe.hpp) as the class MegaMoE.
#include <memory>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "shmoe/moe.hpp"

namespace shmoe::python {
namespace {

// A shmoe::MegaMoE (closed collectively, see Collective) with its configuration.
class Mega : public Collective<MegaMoE> {
 public:
  Mega(const MegaMoEConfig& c, const std::vector<const std::uint8_t*>& w1,
       const std::vector<const std::uint8_t*>& w2)
      : Collective(released([&] { return std::make_unique<MegaMoE>(c, w1, w2); }),
                   "the MegaMoE layer is closed"),
        config_(c) {}
  const MegaMoEConfig& config() const { return config_; }

 private:
  MegaMoEConfig config_;
};

// One pointer per local expert: `weights` holds num_experts_per_pe blocks of rows x
// mx_row_bytes(cols) bytes.
std::vector<const std::uint8_t*> expert_rows(const py::buffer& weights, const char* param,
                                             int experts, int rows, int cols) {
  const Bytes b = bytes_of(weights, param);
  const std::size_t per_expert = static_cast<std::size_t>(rows) * shmoe_mx_row_bytes(cols);
  if (experts < 1 || b.size != per_expert * static_cast<std::size_t>(experts)) {
    throw Error(std::string(param) + " holds " + std::to_string(b.size) + " bytes, not " +
                std::to_string(experts) + " experts of " + std::to_string(per_expert));
  }
  std::vector<const std::uint8_t*> out;
  for (int e = 0; e < experts; ++e) out.push_back(b.as<std::uint8_t>() + e * per_expert);
  return out;
}

std::unique_ptr<Mega> make_mega(int max_tokens_per_pe, int hidden, int intermediate_hidden,
                                int num_topk, int num_experts_per_pe, const std::string& format,
                                std::size_t max_recv_rows, int matrix_workers, int vector_workers,
                                int wave_rows, const std::string& weights, const py::buffer& w1,
                                const py::buffer& w2) {
  MegaMoEConfig c;
  c.max_tokens_per_pe = max_tokens_per_pe;
  c.hidden = hidden;
  c.intermediate_hidden = intermediate_hidden;
  c.num_topk = num_topk;
  c.num_experts_per_pe = num_experts_per_pe;
  c.format = fp8_format_named(format);
  c.max_recv_rows = max_recv_rows;
  c.matrix_workers = matrix_workers;
  c.vector_workers = vector_workers;
  c.wave_rows = wave_rows;
  c.weights = weights == "bf16"  ? SHMOE_MEGA_WEIGHTS_BF16
              : weights == "fp8" ? SHMOE_MEGA_WEIGHTS_FP8
                                 : SHMOE_MEGA_WEIGHTS_AUTO;
  return std::make_unique<Mega>(
      c, expert_rows(w1, "w1", num_experts_per_pe, intermediate_hidden, hidden),
      expert_rows(w2, "w2", num_experts_per_pe, hidden, intermediate_hidden / 2));
}

void run(Mega& self, bool fused, const py::buffer& x, const py::buffer& topk_idx,
         const py::buffer& topk_weights, int num_tokens, const py::buffer& y,
         const py::buffer& num_recv_tokens_per_expert) {
  MegaMoE& op = self.get();
  const Bytes in = bytes_of(x, "x"), ids = bytes_of(topk_idx, "topk_idx");
  const Bytes w = bytes_of(topk_weights, "topk_weights");
  const Bytes out = bytes_of(y, "y", true);
  const Bytes n = bytes_of(num_recv_tokens_per_expert, "num_recv_tokens_per_expert", true);
  const auto& c = self.config();
  const std::size_t t = num_tokens > 0 ? static_cast<std::size_t>(num_tokens) : 0;
  const std::size_t row = static_cast<std::size_t>(c.hidden) * 2;
  const std::size_t routes = t * static_cast<std::size_t>(c.num_topk) * 4;
  if (in.size < t * row || out.size < t * row || ids.size < routes || w.size < routes ||
      n.size < static_cast<std::size_t>(c.num_experts_per_pe) * 4) {
    throw Error("MegaMoE.run: an array is smaller than num_tokens=" + std::to_string(num_tokens) +
                " needs");
  }
  const MegaMoEArgs a{in.as<std::uint16_t>(),  ids.as<std::int32_t>(), w.as<float>(), num_tokens,
                      out.as<std::uint16_t>(), n.as<std::int32_t>()};
  released([&] { fused ? op.run(a) : op.run_unfused(a); });
}

}  // namespace

void bind_mega(py::module_& m) {
  py::class_<Mega>(m, "MegaMoE")
      .def(py::init(&make_mega), py::arg("max_tokens_per_pe"), py::arg("hidden"),
           py::arg("intermediate_hidden"), py::arg("num_topk"), py::arg("num_experts_per_pe"),
           py::arg("format"), py::arg("max_recv_rows"), py::arg("matrix_workers"),
           py::arg("vector_workers"), py::arg("wave_rows"), py::arg("weights"), py::arg("w1"),
           py::arg("w2"))
      .def("run", &run, py::arg("fused"), py::arg("x"), py::arg("topk_idx"),
           py::arg("topk_weights"), py::arg("num_tokens"), py::arg("y"),
           py::arg("num_recv_tokens_per_expert"))
      .def("last_kernel_us", [](Mega& self) { return self.get().last_kernel_us(); })
      .def("close", &Mega::close);
}

}  // namespace shmoe::python
