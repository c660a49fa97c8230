// shmoe.MegaMoE's runtime (the class MegaRuntime over shmoe::MegaMoE of shmoe/moe.hpp): the
// layer's constructor, load_weights and call as one call each, with every argument check here.
// The package converts (tensors to numpy views, dtypes to names) and wraps the results; each call
// checks its arguments, agrees through the library (every PE refuses, or none), then runs.
#include <fmt/format.h>
#include <pybind11/numpy.h>

#include <memory>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "call_checks.hpp"
#include "shmoe/moe.hpp"

namespace shmoe::python {
namespace {

constexpr int kMxBlock = 32;  // elements per E8M0 scale

// One expert weight matrix as the package converted it: floats (float32, or bfloat16 bit
// patterns) or MX codes with their scales.
struct Weights {
  Array values;
  py::object scales;  // None for floats
  std::string scales_dtype;
};

class MegaRuntime {
 public:
  struct Options {
    int max_tokens_per_pe, hidden, intermediate_hidden, num_experts, num_topk;
    std::string mode;
    long long max_recv_rows;
    int matrix_workers, vector_workers, wave_rows;
    std::string weights;
  };

  explicit MegaRuntime(const Options& o) : o_(o) { check_options(); }

  int num_local_experts() const { return o_.num_experts / shmem_n_pes(); }
  bool loaded() const { return layer_ != nullptr; }

  // Collective: this PE's experts, w1 [L, intermediate_hidden, hidden] and w2 [L, hidden,
  // intermediate_hidden / 2], quantized here from floats or given as (codes, scales).
  void load_weights(const Weights& w1, const Weights& w2) {
    Refusal r("MegaMoE.load_weights");
    const int L = num_local_experts(), D = o_.hidden, F = o_.intermediate_hidden;
    check_weights(r, "w1", w1, F, D);
    check_weights(r, "w2", w2, D, F / 2);
    r.settle(false);
    const std::vector<std::uint8_t> rows1 = mx_rows(w1, L * F, D);
    const std::vector<std::uint8_t> rows2 = mx_rows(w2, L * D, F / 2);
    close();
    std::vector<const std::uint8_t*> p1, p2;
    for (int e = 0; e < L; ++e) {
      p1.push_back(rows1.data() + static_cast<std::size_t>(e) * F * shmoe_mx_row_bytes(D));
      p2.push_back(rows2.data() + static_cast<std::size_t>(e) * D * shmoe_mx_row_bytes(F / 2));
    }
    const MegaMoEConfig c = config();
    layer_ = released([&] { return std::make_unique<MegaMoE>(c, p1, p2); });
  }

  // Collective: (y [num_tokens, hidden] bfloat16 bits, rows each local expert received).
  py::tuple run(const py::object& x, const std::string& x_dtype, const py::object& topk_idx,
                const std::string& idx_dtype, const py::object& topk_weights,
                const std::string& w_dtype, bool fused) {
    Refusal r("MegaMoE.__call__");
    if (!loaded()) r.refuse("call load_weights first");
    const Array xs = array_of(x, x_dtype, "x");
    check_payload(r, xs, "bfloat16", {{o_.max_tokens_per_pe, "max_tokens_per_pe"}, {o_.hidden}});
    const py::ssize_t n = xs.info.ndim == 2 ? xs.info.shape[0] : 0;
    const Array idx = array_of(topk_idx, idx_dtype, "topk_idx");
    if (!is_integer(idx.dtype)) {
      r.refuse(fmt::format("topk_idx has dtype {}; expert indices are integers", idx.dtype));
    }
    r.shape(idx, {{n}, {o_.num_topk}});
    const Array w = array_of(topk_weights, w_dtype, "topk_weights");
    if (w.dtype != "float32") {
      r.refuse(fmt::format("topk_weights has dtype {}; weights are floating point", w.dtype));
    }
    r.shape(w, {{n}, {o_.num_topk}});
    r.settle(false);
    const std::vector<std::int32_t> ids = indices_int32(idx);
    py::array_t<std::uint16_t> y({n, static_cast<py::ssize_t>(o_.hidden)});
    py::array_t<std::int32_t> counts(num_local_experts());
    const MegaMoEArgs a{static_cast<const std::uint16_t*>(xs.info.ptr),
                        ids.data(),
                        static_cast<const float*>(w.info.ptr),
                        static_cast<int>(n),
                        y.mutable_data(),
                        counts.mutable_data()};
    MegaMoE& layer = *layer_;
    released([&] { fused ? layer.run(a) : layer.run_unfused(a); });
    return py::make_tuple(y, counts);
  }

  double last_kernel_us() const {
    if (!loaded()) throw Error("MegaMoE.last_kernel_us: no call yet");
    return layer_->last_kernel_us();
  }

  void close() {
    released([&] { layer_.reset(); });
  }

 private:
  void check_options() const {
    Refusal r("shmoe.MegaMoE");
    const int n = shmem_n_pes();
    check_range(r, "max_tokens_per_pe", o_.max_tokens_per_pe, 1);
    check_range(r, "hidden", o_.hidden, 1);
    check_range(r, "intermediate_hidden", o_.intermediate_hidden, 2);
    if (o_.intermediate_hidden % 2 != 0) {
      r.refuse(fmt::format("intermediate_hidden={} must be even (SwiGLU splits it in halves)",
                           o_.intermediate_hidden));
    }
    check_range(r, "num_experts", o_.num_experts, 1);
    if (o_.num_experts >= 1 && o_.num_experts % n != 0) {
      r.refuse(fmt::format("num_experts={} is not divisible by the {} PEs", o_.num_experts, n));
    }
    check_range(r, "num_topk", o_.num_topk, 1);
    if (o_.num_experts >= 1 && o_.num_topk > o_.num_experts) {
      r.refuse(fmt::format("num_topk={} is more than num_experts={}", o_.num_topk, o_.num_experts));
    }
    if (o_.mode != "e4m3" && o_.mode != "e5m2") {
      r.refuse(fmt::format("mode='{}' is not one of e4m3, e5m2", o_.mode));
    }
    check_range(r, "max_recv_rows", o_.max_recv_rows, 0);
    if (o_.matrix_workers < 0 || o_.vector_workers < 0) {
      r.refuse(fmt::format("workers=({}, {}) must be (matrix, vector) counts", o_.matrix_workers,
                           o_.vector_workers));
    }
    check_range(r, "wave_rows", o_.wave_rows, 0);
    if (o_.weights != "auto" && o_.weights != "fp8" && o_.weights != "bf16") {
      r.refuse(fmt::format("weights='{}' must be 'auto', 'fp8' or 'bf16'", o_.weights));
    }
    r.settle(false);
  }

  MegaMoEConfig config() const {
    MegaMoEConfig c;
    c.max_tokens_per_pe = o_.max_tokens_per_pe;
    c.hidden = o_.hidden;
    c.intermediate_hidden = o_.intermediate_hidden;
    c.num_topk = o_.num_topk;
    c.num_experts_per_pe = num_local_experts();
    c.format = fp8_format_named(o_.mode);
    c.max_recv_rows = static_cast<std::size_t>(o_.max_recv_rows);
    c.matrix_workers = o_.matrix_workers;
    c.vector_workers = o_.vector_workers;
    c.wave_rows = o_.wave_rows;
    c.weights = o_.weights == "bf16"  ? SHMOE_MEGA_WEIGHTS_BF16
                : o_.weights == "fp8" ? SHMOE_MEGA_WEIGHTS_FP8
                                      : SHMOE_MEGA_WEIGHTS_AUTO;
    return c;
  }

  // w [L, rows, cols] as floats, or codes [L, rows, cols] with scales [L, rows, cols / 32].
  void check_weights(Refusal& r, const char* name, const Weights& w, int rows, int cols) const {
    const py::ssize_t L = num_local_experts();
    if (w.scales.is_none()) {
      if (w.values.dtype != "float32" && w.values.dtype != "bfloat16") {
        r.refuse(
            fmt::format("{} has dtype {}; give floats or (codes, scales)", name, w.values.dtype));
      }
      return r.shape(w.values, {{L}, {rows}, {cols}});
    }
    const std::string codes_param = std::string(name) + "[0] (codes)";
    const std::string scales_param = std::string(name) + "[1] (scales)";
    if (w.values.dtype != "uint8" || w.scales_dtype != "uint8") {
      r.refuse(fmt::format("{} codes and scales must be uint8, not {} and {}", name, w.values.dtype,
                           w.scales_dtype));
    }
    r.shape(w.values.info, codes_param.c_str(), {{L}, {rows}, {cols}});
    r.shape(w.scales.cast<py::buffer>().request(), scales_param.c_str(),
            {{L}, {rows}, {(cols + kMxBlock - 1) / kMxBlock}});
  }

  // The operators' MX row layout of `rows` rows of `cols`: quantized from floats in the layer's
  // mode, or the codes and scales laid side by side.
  std::vector<std::uint8_t> mx_rows(const Weights& w, int rows, int cols) const {
    const std::size_t row = shmoe_mx_row_bytes(cols), n = static_cast<std::size_t>(rows);
    std::vector<std::uint8_t> out(n * row, 0);
    if (w.scales.is_none()) {
      const shmoe_fp8_format_t f = fp8_format_named(o_.mode);
      const int rc = released([&] {
        return w.values.dtype == "bfloat16"
                   ? shmoe_mx_quantize_bf16_rows(
                         static_cast<const std::uint16_t*>(w.values.info.ptr), n, cols, f,
                         out.data())
                   : shmoe_mx_quantize_rows(static_cast<const float*>(w.values.info.ptr), n, cols,
                                            f, out.data());
      });
      if (rc != 0) throw Error(shmoe_moe_last_error());
      return out;
    }
    const auto* codes = static_cast<const std::uint8_t*>(w.values.info.ptr);
    const auto* scales =
        static_cast<const std::uint8_t*>(w.scales.cast<py::buffer>().request().ptr);
    const std::size_t c = static_cast<std::size_t>(cols), blocks = (c + kMxBlock - 1) / kMxBlock;
    for (std::size_t i = 0; i < n; ++i) {
      std::copy(codes + i * c, codes + (i + 1) * c, out.data() + i * row);
      std::copy(scales + i * blocks, scales + (i + 1) * blocks, out.data() + i * row + c);
    }
    return out;
  }

  Options o_;
  std::unique_ptr<MegaMoE> layer_;
};

Weights weights_of(const py::object& values, const std::string& dtype, const py::object& scales,
                   const std::string& scales_dtype, const char* name) {
  return {array_of(values, dtype, name), scales, scales_dtype};
}

}  // namespace

void bind_mega(py::module_& m) {
  py::class_<MegaRuntime>(m, "MegaRuntime")
      .def(py::init([](int max_tokens_per_pe, int hidden, int intermediate_hidden, int num_experts,
                       int num_topk, const std::string& mode, long long max_recv_rows,
                       int matrix_workers, int vector_workers, int wave_rows,
                       const std::string& weights) {
             return std::make_unique<MegaRuntime>(MegaRuntime::Options{
                 max_tokens_per_pe, hidden, intermediate_hidden, num_experts, num_topk, mode,
                 max_recv_rows, matrix_workers, vector_workers, wave_rows, weights});
           }),
           py::arg("max_tokens_per_pe"), py::arg("hidden"), py::arg("intermediate_hidden"),
           py::arg("num_experts"), py::arg("num_topk"), py::arg("mode"), py::arg("max_recv_rows"),
           py::arg("matrix_workers"), py::arg("vector_workers"), py::arg("wave_rows"),
           py::arg("weights"))
      .def_property_readonly("num_local_experts", &MegaRuntime::num_local_experts)
      .def_property_readonly("loaded", &MegaRuntime::loaded)
      .def(
          "load_weights",
          [](MegaRuntime& self, const py::object& w1, const std::string& w1_dtype,
             const py::object& w1_scales, const std::string& w1_scales_dtype, const py::object& w2,
             const std::string& w2_dtype, const py::object& w2_scales,
             const std::string& w2_scales_dtype) {
            self.load_weights(weights_of(w1, w1_dtype, w1_scales, w1_scales_dtype, "w1"),
                              weights_of(w2, w2_dtype, w2_scales, w2_scales_dtype, "w2"));
          },
          py::arg("w1"), py::arg("w1_dtype"), py::arg("w1_scales"), py::arg("w1_scales_dtype"),
          py::arg("w2"), py::arg("w2_dtype"), py::arg("w2_scales"), py::arg("w2_scales_dtype"))
      .def("run", &MegaRuntime::run, py::arg("x"), py::arg("x_dtype"), py::arg("topk_idx"),
           py::arg("idx_dtype"), py::arg("topk_weights"), py::arg("w_dtype"), py::arg("fused"))
      .def("last_kernel_us", &MegaRuntime::last_kernel_us)
      .def("close", &MegaRuntime::close);
}

}  // namespace shmoe::python
