// The MegaMoE layer (shmoe::MegaMoELayer of shmoe/moe.hpp) as the class MegaMoE.
#include <memory>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "shmoe/moe.hpp"

namespace shmoe::python {
namespace {

// A shmoe::MegaMoELayer (closed collectively, see Collective) with its configuration.
class Mega : public Collective<MegaMoELayer> {
 public:
  Mega(const shmoe_mega_moe_config_t& c, const std::vector<const std::uint8_t*>& w1,
       const std::vector<const std::uint8_t*>& w2)
      : Collective(released([&] { return std::make_unique<MegaMoELayer>(c, w1, w2); }),
                   "the MegaMoE layer is closed"),
        config_(c) {}
  const shmoe_mega_moe_config_t& config() const { return config_; }

 private:
  shmoe_mega_moe_config_t config_;
};

// One pointer per local expert: `weights` holds experts_per_pe blocks of rows x
// mx_row_bytes(cols) bytes.
std::vector<const std::uint8_t*> expert_rows(const py::buffer& weights, const char* param,
                                             int experts, int rows, int cols) {
  const Bytes b = bytes_of(weights, param);
  const std::size_t per_expert = static_cast<std::size_t>(rows) * shmoe_mx_row_bytes(cols);
  if (experts < 1 || b.size != per_expert * static_cast<std::size_t>(experts)) {
    throw Refused(std::string(param) + " holds " + std::to_string(b.size) + " bytes, not " +
                  std::to_string(experts) + " experts of " + std::to_string(per_expert));
  }
  std::vector<const std::uint8_t*> out;
  for (int e = 0; e < experts; ++e) out.push_back(b.as<std::uint8_t>() + e * per_expert);
  return out;
}

}  // namespace

void bind_mega(py::module_& m) {
  py::class_<Mega>(m, "MegaMoE")
      .def(py::init([](int tokens, int model_dim, int ffn_dim, int topk, int experts_per_pe,
                       const std::string& format, std::size_t max_received_tokens,
                       int matrix_workers, int vector_workers, int wave_rows,
                       const std::string& weights, const py::buffer& w1, const py::buffer& w2) {
        const shmoe_mega_moe_config_t c{tokens,
                                        model_dim,
                                        ffn_dim,
                                        topk,
                                        experts_per_pe,
                                        fp8_format_named(format),
                                        max_received_tokens,
                                        matrix_workers,
                                        vector_workers,
                                        wave_rows,
                                        weights == "bf16"  ? SHMOE_MEGA_WEIGHTS_BF16
                                        : weights == "fp8" ? SHMOE_MEGA_WEIGHTS_FP8
                                                           : SHMOE_MEGA_WEIGHTS_AUTO};
        return std::make_unique<Mega>(
            c, expert_rows(w1, "w1", experts_per_pe, ffn_dim, model_dim),
            expert_rows(w2, "w2", experts_per_pe, model_dim, ffn_dim / 2));
      }))
      .def(
          "run",
          [](Mega& self, bool fused, const py::buffer& x, const py::buffer& expert_ids,
             const py::buffer& weights, int tokens, const py::buffer& y, const py::buffer& counts) {
            MegaMoELayer& op = self.get();
            const Bytes in = bytes_of(x, "x"), ids = bytes_of(expert_ids, "expert_ids");
            const Bytes w = bytes_of(weights, "routing_weights");
            const Bytes out = bytes_of(y, "y", true), n = bytes_of(counts, "counts", true);
            const auto& c = self.config();
            const std::size_t t = tokens > 0 ? static_cast<std::size_t>(tokens) : 0;
            const std::size_t row = static_cast<std::size_t>(c.model_dim) * 2;
            const std::size_t routes = t * static_cast<std::size_t>(c.topk) * 4;
            if (in.size < t * row || out.size < t * row || ids.size < routes || w.size < routes ||
                n.size < static_cast<std::size_t>(c.experts_per_pe) * 4) {
              throw Refused("MegaMoE.run: an array is smaller than tokens=" +
                            std::to_string(tokens) + " needs");
            }
            const MegaMoEInput a{in.as<std::uint16_t>(),  ids.as<std::int32_t>(),
                                 w.as<float>(),           tokens,
                                 out.as<std::uint16_t>(), n.as<std::int32_t>()};
            released([&] { fused ? op.run(a) : op.run_unfused(a); });
          })
      .def("last_kernel_us", [](Mega& self) { return self.get().last_kernel_us(); })
      .def("close", &Mega::close);
}

}  // namespace shmoe::python
