// The MoE dispatch and combine operators (moe/moe.hpp) as the class MoeContext, and the MX FP8
// row layout and token quantizer that FP8 dispatch uses (moe/expert_ffn.hpp).
#include "moe/moe.hpp"

#include <memory>
#include <string>

#include "bindings.hpp"
#include "moe/expert_ffn.hpp"

namespace shmoe::python {
namespace {

moe::DType dtype_named(const std::string& name) {
  auto t = moe::parse_dtype(name);
  if (!t) throw Refused("MoeContext: dtype '" + name + "' is not an MoE element type");
  return *t;
}

// A MoeContext whose collective destruction happens in close(), called by the package in the
// same order on every PE; a context the garbage collector finds still open is left to the
// process's end rather than freed at a moment the other PEs know nothing of.
class Context {
 public:
  explicit Context(const moe::MoeConfig& c)
      : ctx_(released([&] { return std::make_unique<moe::MoeContext>(c); })) {}
  ~Context() { (void)ctx_.release(); }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  moe::MoeContext& get() {
    if (!ctx_) throw Refused("the MoE context is closed");
    return *ctx_;
  }
  void close() {
    released([&] { ctx_.reset(); });
  }

 private:
  std::unique_ptr<moe::MoeContext> ctx_;
};

// The operator's shape, as both the context and its window-size query take it.
moe::MoeConfig moe_config(int experts_per_pe, int max_bs, int hidden, int topk,
                          const std::string& dtype, std::size_t max_recv_rows) {
  moe::MoeConfig c;
  c.experts_per_pe = experts_per_pe;
  c.max_bs = max_bs;
  c.hidden = hidden;
  c.topk = topk;
  c.dtype = dtype_named(dtype);
  c.max_recv_rows = max_recv_rows;
  return c;
}

}  // namespace

numeric::Fp8Format fp8_format_named(const std::string& name) {
  if (name == "e4m3") return numeric::Fp8Format::kE4M3;
  if (name == "e5m2") return numeric::Fp8Format::kE5M2;
  throw Refused("FP8 format '" + name + "' is not one of e4m3, e5m2");
}

void bind_moe(py::module_& m) {
  py::class_<Context>(m, "MoeContext")
      .def(py::init([](int experts_per_pe, int max_bs, int hidden, int topk,
                       const std::string& dtype, std::size_t max_recv_rows, int matrix_workers,
                       int vector_workers, std::size_t doubleplane_threshold) {
        moe::MoeConfig c = moe_config(experts_per_pe, max_bs, hidden, topk, dtype, max_recv_rows);
        c.workers = {matrix_workers, vector_workers};
        if (doubleplane_threshold != 0) c.doubleplane_threshold = doubleplane_threshold;
        return std::make_unique<Context>(c);
      }))
      .def("recv_capacity", [](Context& c) { return c.get().recv_capacity(); })
      .def("receive_window",
           [](Context& c) { return reinterpret_cast<std::uintptr_t>(c.get().receive_window()); })
      .def("dispatch",
           [](Context& c, bool double_plane, Address x, Address expert_ids, Address scales, int bs,
              Address expand_x, Address assist_info, Address ep_recv_count,
              Address expert_token_nums, Address expand_scales) {
             moe::MoeContext& ctx = c.get();
             const moe::DispatchArgs in{at<const void>(x), at<const std::int32_t>(expert_ids),
                                        at<const float>(scales), bs};
             const moe::DispatchOutputs out{
                 at<void>(expand_x), at<std::int32_t>(assist_info), at<std::int32_t>(ep_recv_count),
                 at<std::int32_t>(expert_token_nums), at<float>(expand_scales)};
             return released([&] {
               return double_plane ? moe::dispatch_doubleplane(ctx, in, out)
                                   : moe::dispatch_classic(ctx, in, out);
             });
           })
      .def("combine",
           [](Context& c, bool double_plane, Address expand_x, Address assist_info,
              Address ep_recv_count, Address expert_ids, Address scales, int bs, Address x_out) {
             moe::MoeContext& ctx = c.get();
             const moe::CombineArgs in{at<const void>(expand_x),
                                       at<const std::int32_t>(assist_info),
                                       at<const std::int32_t>(ep_recv_count),
                                       at<const std::int32_t>(expert_ids),
                                       at<const float>(scales),
                                       bs,
                                       at<void>(x_out)};
             released([&] {
               double_plane ? moe::combine_doubleplane(ctx, in) : moe::combine_classic(ctx, in);
             });
           })
      .def("last_timing",
           [](Context& c) {
             const moe::OpTiming& t = c.get().last_timing();
             py::dict d;
             d["worker_us"] = t.worker_us;
             d["comm_us"] = t.comm_us;
             d["bytes_sent"] = t.bytes_sent;
             d["bytes_via_copy_engine"] = t.bytes_via_copy_engine;
             return d;
           })
      .def("close", &Context::close);

  m.def("moe_window_bytes", [](int experts_per_pe, int max_bs, int hidden, int topk,
                               const std::string& dtype, std::size_t max_recv_rows, int n_pes) {
    return moe::MoeContext::window_bytes(
        moe_config(experts_per_pe, max_bs, hidden, topk, dtype, max_recv_rows), n_pes);
  });

  // An MX FP8 row of n elements: n codes, then ceil(n / 32) E8M0 scales, padded to 16 bytes.
  m.def("mx_row_bytes", [](int n) { return moe::MxRow{n}.bytes(); });
  m.def("quantize_tokens", [](int hidden, const std::string& format, Address x_bf16,
                              std::size_t rows, Address out, std::size_t stride) {
    const moe::ExpertFfnShape shape{hidden, 2, fp8_format_named(format)};
    released([&] {
      moe::quantize_tokens(shape, at<const std::uint16_t>(x_bf16), rows, at<std::byte>(out),
                           stride);
    });
  });
}

}  // namespace shmoe::python
