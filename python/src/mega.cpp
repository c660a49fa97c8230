// The MegaMoE layer (moe/mega_moe.hpp) as the class MegaMoe, and the MX FP8 quantizer of its
// weight rows (numeric/mx.hpp, which moe/expert_ffn.hpp declares the row layout with).
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "moe/mega_moe.hpp"

namespace shmoe::python {
namespace {

// As moe.cpp's Context: destroyed collectively by close(), never by the garbage collector.
class Mega {
 public:
  Mega(const moe::MegaMoeConfig& c, const moe::MegaMoeWeights& w)
      : op_(released([&] { return std::make_unique<moe::MegaMoe>(c, w); })) {}
  ~Mega() { (void)op_.release(); }
  Mega(const Mega&) = delete;
  Mega& operator=(const Mega&) = delete;

  moe::MegaMoe& get() {
    if (!op_) throw Refused("the MegaMoE layer is closed");
    return *op_;
  }
  void close() {
    released([&] { op_.reset(); });
  }

 private:
  std::unique_ptr<moe::MegaMoe> op_;
};

moe::MegaMoeConfig config_of(int tokens, int model_dim, int ffn_dim, int topk, int experts_per_pe,
                             const std::string& format, std::size_t max_received_tokens,
                             int matrix_workers, int vector_workers, int wave_rows) {
  moe::MegaMoeConfig c;
  c.tokens = tokens;
  c.model_dim = model_dim;
  c.ffn_dim = ffn_dim;
  c.topk = topk;
  c.experts_per_pe = experts_per_pe;
  c.format = fp8_format_named(format);
  c.max_received_tokens = max_received_tokens;
  c.workers = {matrix_workers, vector_workers};
  c.wave_rows = wave_rows;
  return c;
}

}  // namespace

void bind_mega(py::module_& m) {
  py::class_<Mega>(m, "MegaMoe")
      .def(py::init([](int tokens, int model_dim, int ffn_dim, int topk, int experts_per_pe,
                       const std::string& format, std::size_t max_received_tokens,
                       int matrix_workers, int vector_workers, int wave_rows,
                       const std::vector<Address>& w1, const std::vector<Address>& w2) {
        moe::MegaMoeWeights w;
        for (Address a : w1) w.w1.push_back(at<const std::uint8_t>(a));
        for (Address a : w2) w.w2.push_back(at<const std::uint8_t>(a));
        return std::make_unique<Mega>(
            config_of(tokens, model_dim, ffn_dim, topk, experts_per_pe, format, max_received_tokens,
                      matrix_workers, vector_workers, wave_rows),
            w);
      }))
      .def("run",
           [](Mega& self, bool fused, Address x, Address expert_ids, Address weights, int tokens,
              Address y, Address counts) {
             moe::MegaMoe& op = self.get();
             const moe::MegaMoeArgs a{
                 at<const std::uint16_t>(x), at<const std::int32_t>(expert_ids),
                 at<const float>(weights),   tokens,
                 at<std::uint16_t>(y),       at<std::int32_t>(counts)};
             released([&] { fused ? op.run(a) : op.run_unfused(a); });
           })
      .def("last_kernel_us", [](Mega& self) { return self.get().last_kernel_us(); })
      .def("close", &Mega::close);

  m.def("mega_symmetric_bytes", [](int tokens, int model_dim, int ffn_dim, int topk,
                                   int experts_per_pe, const std::string& format,
                                   std::size_t max_received_tokens, int n_pes, bool unfused) {
    return moe::MegaMoe::symmetric_bytes(config_of(tokens, model_dim, ffn_dim, topk, experts_per_pe,
                                                   format, max_received_tokens, 0, 0, 128),
                                         n_pes, unfused);
  });

  // rows x cols fp32 values -> rows of MxRow{cols} layout, `stride` bytes apart.
  m.def("quantize_mx_rows", [](Address src, std::size_t rows, int cols, const std::string& format,
                               Address out, std::size_t stride) {
    const numeric::Fp8Format f = fp8_format_named(format);
    const moe::MxRow layout{cols};
    released([&] {
      for (std::size_t r = 0; r < rows; ++r) {
        std::uint8_t* row = at<std::uint8_t>(out) + r * stride;
        numeric::quantize_mx(at<const float>(src) + r * static_cast<std::size_t>(cols), cols, f,
                             row, row + layout.scales_offset());
      }
    });
  });
  // The inverse: rows of MxRow{cols} layout (mx_row_bytes(cols) apart) -> rows x cols fp32.
  m.def("dequantize_mx_rows",
        [](Address rows_in, std::size_t rows, int cols, const std::string& format, Address out) {
          const numeric::Fp8Format f = fp8_format_named(format);
          const moe::MxRow layout{cols};
          released([&] {
            for (std::size_t r = 0; r < rows; ++r) {
              const std::uint8_t* row = at<const std::uint8_t>(rows_in) + r * layout.bytes();
              numeric::dequantize_mx(row, row + layout.scales_offset(), cols, f,
                                     at<float>(out) + r * static_cast<std::size_t>(cols));
            }
          });
        });
}

}  // namespace shmoe::python
