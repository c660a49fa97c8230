// The MoE dispatch and combine operators (shmoe::MoeBuffer of shmoe/moe.hpp) as the class
// MoeBuffer, and the MX FP8 row helpers that FP8 dispatch and MegaMoE's weights use.
#include "shmoe/moe.hpp"

#include <pybind11/numpy.h>

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "moe_buffer.hpp"

namespace shmoe::python {
namespace {

struct DTypeInfo {
  shmoe_dtype_t code;
  std::size_t bytes;
};

DTypeInfo dtype_named(const std::string& name) {
  if (name == "int32") return {SHMOE_DTYPE_INT32, 4};
  if (name == "float16") return {SHMOE_DTYPE_FLOAT16, 2};
  if (name == "bfloat16") return {SHMOE_DTYPE_BFLOAT16, 2};
  if (name == "float32") return {SHMOE_DTYPE_FLOAT32, 4};
  throw Refused("MoeBuffer: dtype '" + name + "' is not one of int32, float16, bfloat16, float32");
}

// Refuses an array smaller than the call reads or writes (the package sizes them; this keeps a
// mistake there from becoming a write past an array).
void require_bytes(const Bytes& b, std::size_t need, const char* param) {
  if (b.data != nullptr && b.size < need) {
    throw Refused(std::string(param) + " holds " + std::to_string(b.size) +
                  " bytes; the call needs " + std::to_string(need));
  }
}

shmoe_plane_t plane_of(bool double_plane) {
  return double_plane ? SHMOE_PLANE_DOUBLE : SHMOE_PLANE_CLASSIC;
}

// Shrink mode's pe_mask (int32 [n_pes], written by the call), or null for None.
std::int32_t* pe_mask_of(const py::object& pe_mask) {
  const Bytes m = bytes_or_null(pe_mask, "pe_mask", true);
  require_bytes(m, static_cast<std::size_t>(shmem_n_pes()) * 4, "pe_mask");
  return m.as<std::int32_t>();
}

}  // namespace

void bind_moe(py::module_& m) {
  py::class_<HostBlock>(m, "HostBlock", py::buffer_protocol()).def_buffer(&HostBlock::info);
  py::class_<Buffer>(m, "MoeBuffer")
      .def(py::init([](int experts_per_pe, int max_bs, int hidden, int topk,
                       const std::string& dtype, std::size_t max_recv_rows, int matrix_workers,
                       int vector_workers, std::size_t doubleplane_threshold, int token_side_bytes,
                       int header_ints, int shrink_timeout_ms) {
             const DTypeInfo t = dtype_named(dtype);
             const shmoe_moe_config_t c{experts_per_pe,
                                        max_bs,
                                        hidden,
                                        topk,
                                        t.code,
                                        max_recv_rows,
                                        matrix_workers,
                                        vector_workers,
                                        doubleplane_threshold,
                                        token_side_bytes,
                                        header_ints,
                                        shrink_timeout_ms};
             return std::make_unique<Buffer>(c, t.bytes);
           }),
           py::arg("experts_per_pe"), py::arg("max_bs"), py::arg("hidden"), py::arg("topk"),
           py::arg("dtype"), py::arg("max_recv_rows"), py::arg("matrix_workers"),
           py::arg("vector_workers"), py::arg("doubleplane_threshold"),
           py::arg("token_side_bytes") = 0, py::arg("header_ints") = 0,
           py::arg("shrink_timeout_ms") = 0)
      .def("recv_capacity", &Buffer::capacity)
      // recv_capacity rows of host memory for a dispatch's output, from the buffer's pool.
      .def("take_rows", &Buffer::take_rows)
      // max_bs rows of host memory for a combine's output, from a second pool.
      .def("take_token_rows", &Buffer::take_token_rows)
      // The receive window's bytes (recv_capacity rows), where dispatch's rows land.
      .def("receive_window",
           [](Buffer& b) {
             void* w = b.get().receive_window();
             return py::memoryview::from_memory(
                 w, static_cast<py::ssize_t>(b.capacity() * b.row_bytes()));
           })
      .def(
          "dispatch",
          [](Buffer& b, bool double_plane, const py::buffer& x, const py::buffer& expert_ids,
             const py::object& scales, int bs, const py::buffer& expand_x,
             const py::buffer& assist_info, const py::buffer& ep_recv_count,
             const py::buffer& expert_token_nums, const py::object& expand_scales,
             const py::object& token_side, const py::object& header_ints, int verdict,
             const py::object& expand_side, const py::object& all_header_ints,
             const py::object& all_counts, const py::object& pe_mask) {
            MoeBuffer& op = b.get();
            std::int32_t* const mask = pe_mask_of(pe_mask);
            if (verdict < SHMOE_CALL_PROCEED || verdict > SHMOE_CALL_RETRY) {
              throw Refused("MoeBuffer.dispatch: verdict=" + std::to_string(verdict) +
                            " is out of range (0 proceed, 1 refuse, 2 retry)");
            }
            if (verdict != SHMOE_CALL_PROCEED) {  // the operator reads no other argument
              return released([&] {
                return op.dispatch({nullptr, nullptr, nullptr, 0, nullptr, nullptr,
                                    static_cast<shmoe_call_verdict_t>(verdict), mask},
                                   {}, plane_of(double_plane));
              });
            }
            const std::size_t tokens = bs > 0 ? static_cast<std::size_t>(bs) : 0;
            const std::size_t routes = tokens * static_cast<std::size_t>(b.topk());
            const Bytes in = bytes_of(x, "x"), ids = bytes_of(expert_ids, "expert_ids");
            const Bytes w = bytes_or_null(scales, "scales");
            const Bytes out = bytes_of(expand_x, "expand_x", true);
            const Bytes meta = bytes_of(assist_info, "assist_info", true);
            const Bytes prefix = bytes_of(ep_recv_count, "ep_recv_count", true);
            const Bytes nums = bytes_of(expert_token_nums, "expert_token_nums", true);
            const Bytes out_w = bytes_or_null(expand_scales, "expand_scales", true);
            require_bytes(in, tokens * b.row_bytes(), "x");
            require_bytes(ids, routes * 4, "expert_ids");
            require_bytes(w, routes * 4, "scales");
            require_bytes(out, b.capacity() * b.row_bytes(), "expand_x");
            require_bytes(meta, b.capacity() * 12, "assist_info");
            const std::size_t experts = static_cast<std::size_t>(b.experts_per_pe());
            require_bytes(nums, experts * 4, "expert_token_nums");
            require_bytes(prefix, experts * static_cast<std::size_t>(shmem_n_pes()) * 4,
                          "ep_recv_count");
            require_bytes(out_w, b.capacity() * 4, "expand_scales");
            const std::size_t side = b.token_side_bytes(), n = b.header_ints(),
                              pes = static_cast<std::size_t>(shmem_n_pes());
            const Bytes side_in = bytes_or_null(token_side, "token_side");
            const Bytes ints_in = bytes_or_null(header_ints, "header_ints");
            const Bytes side_out = bytes_or_null(expand_side, "expand_side", true);
            const Bytes ints_out = bytes_or_null(all_header_ints, "all_header_ints", true);
            const Bytes counts_out = bytes_or_null(all_counts, "all_counts", true);
            require_bytes(side_in, tokens * side, "token_side");
            require_bytes(ints_in, n * 4, "header_ints");
            require_bytes(side_out, b.capacity() * side, "expand_side");
            require_bytes(ints_out, pes * n * 4, "all_header_ints");
            require_bytes(counts_out, pes * pes * experts * 4, "all_counts");
            return released([&] {
              return op.dispatch(
                  {in.data, ids.as<std::int32_t>(), w.as<float>(), bs, side_in.data,
                   ints_in.as<std::int32_t>(), static_cast<shmoe_call_verdict_t>(verdict), mask},
                  {out.data, meta.as<std::int32_t>(), prefix.as<std::int32_t>(),
                   nums.as<std::int32_t>(), out_w.as<float>(), side_out.data,
                   ints_out.as<std::int32_t>(), counts_out.as<std::int32_t>()},
                  plane_of(double_plane));
            });
          },
          // Returns the rows received, or -1 on every PE when some PE's verdict was retry (2).
          py::arg("double_plane"), py::arg("x"), py::arg("expert_ids"), py::arg("scales"),
          py::arg("bs"), py::arg("expand_x"), py::arg("assist_info"), py::arg("ep_recv_count"),
          py::arg("expert_token_nums"), py::arg("expand_scales"),
          py::arg("token_side") = py::none(), py::arg("header_ints") = py::none(),
          py::arg("verdict") = 0, py::arg("expand_side") = py::none(),
          py::arg("all_header_ints") = py::none(), py::arg("all_counts") = py::none(),
          py::arg("pe_mask") = py::none())

      .def(
          "combine",
          [](Buffer& b, bool double_plane, const py::buffer& expand_x,
             const py::buffer& assist_info, const py::buffer& ep_recv_count,
             const py::buffer& expert_ids, const py::buffer& scales, int bs,
             const py::buffer& x_out, bool x_out_float32, int caller_mode, int verdict,
             const py::object& pe_mask) {
            MoeBuffer& op = b.get();
            std::int32_t* const mask = pe_mask_of(pe_mask);
            if (verdict != SHMOE_CALL_PROCEED) {  // refused: the operator reads nothing else
              CombineInput refused;
              refused.verdict = static_cast<shmoe_call_verdict_t>(verdict);
              refused.pe_mask = mask;
              released([&] { op.combine(refused, plane_of(double_plane)); });
              return;
            }
            const std::size_t tokens = bs > 0 ? static_cast<std::size_t>(bs) : 0;
            const Bytes rows = bytes_of(expand_x, "expand_x");
            const Bytes meta = bytes_of(assist_info, "assist_info");
            const Bytes prefix = bytes_of(ep_recv_count, "ep_recv_count");
            const Bytes ids = bytes_of(expert_ids, "expert_ids");
            const Bytes w = bytes_of(scales, "scales");
            const Bytes out = bytes_of(x_out, "x_out", true);
            require_bytes(ids, tokens * static_cast<std::size_t>(b.topk()) * 4, "expert_ids");
            require_bytes(w, tokens * static_cast<std::size_t>(b.topk()) * 4, "scales");
            const std::size_t hidden = static_cast<std::size_t>(b.hidden());
            require_bytes(out, tokens * (x_out_float32 ? hidden * 4 : b.row_bytes()), "x_out");
            released([&] {
              op.combine({rows.data, meta.as<std::int32_t>(), prefix.as<std::int32_t>(),
                          ids.as<std::int32_t>(), w.as<float>(), bs, out.data, x_out_float32,
                          caller_mode, static_cast<shmoe_call_verdict_t>(verdict), mask},
                         plane_of(double_plane));
            });
          },
          // x_out_float32: x_out gets the fp32 sums; caller_mode: 0..127, alike on every PE;
          // verdict 1: this PE refuses the call (every PE's raises; no other input is read).
          py::arg("double_plane"), py::arg("expand_x"), py::arg("assist_info"),
          py::arg("ep_recv_count"), py::arg("expert_ids"), py::arg("scales"), py::arg("bs"),
          py::arg("x_out"), py::arg("x_out_float32") = false, py::arg("caller_mode") = 0,
          py::arg("verdict") = 0, py::arg("pe_mask") = py::none())
      // Shrink mode: a barrier of the PEs pe_mask has live; masks those that miss the bound.
      .def(
          "sync_live",
          [](Buffer& b, const py::buffer& pe_mask) {
            MoeBuffer& op = b.get();
            std::int32_t* const mask = pe_mask_of(pe_mask);
            released([&] { op.sync_live(mask); });
          },
          py::arg("pe_mask"))
      // Shrink mode: every PE, masked or not, meets; those in time are unmasked and go on, with
      // the operators of `others`, from the same call counters.
      .def(
          "rejoin",
          [](Buffer& b, const py::buffer& pe_mask, const py::list& others) {
            MoeBuffer& op = b.get();
            std::int32_t* const mask = pe_mask_of(pe_mask);
            std::vector<shmoe_moe_t> handles;
            for (const py::handle o : others) handles.push_back(o.cast<Buffer&>().get().handle());
            released([&] { op.rejoin(mask, handles); });
          },
          py::arg("pe_mask"), py::arg("others"))
      // This PE's row of the wait matrix of the last call: microseconds it waited for each PE.
      .def("last_source_waits",
           [](Buffer& b) {
             const std::vector<double> us = b.get().last_source_waits();
             py::array_t<double> out(static_cast<py::ssize_t>(us.size()));
             std::copy(us.begin(), us.end(), out.mutable_data());
             return out;
           })
      .def("last_timing",
           [](Buffer& b) {
             const shmoe_moe_timing_t t = b.get().last_timing();
             py::dict d;
             d["worker_us"] = t.worker_us_max;
             d["workers"] = t.workers;
             d["comm_us"] = t.comm_us;
             d["bytes_sent"] = t.bytes_sent;
             d["bytes_via_copy_engine"] = t.bytes_via_copy_engine;
             d["rows_received"] = t.rows_received;
             return d;
           })
      .def("close", &Buffer::close)
      .def("abandon", &Buffer::abandon);

  // An MX FP8 row of n elements: n codes, then ceil(n / 32) E8M0 scales, padded to 16 bytes.
  m.def("mx_row_bytes", [](int n) { return shmoe_mx_row_bytes(n); });
  // rows x cols values (float32, or bfloat16 bits as uint16) -> rows of mx_row_bytes(cols).
  m.def("quantize_mx_rows", [](const py::buffer& src, std::size_t rows, int cols,
                               const std::string& format, bool bf16, const py::buffer& out) {
    const Bytes s = bytes_of(src, "src"), d = bytes_of(out, "out", true);
    const std::size_t n = rows * static_cast<std::size_t>(cols > 0 ? cols : 0);
    require_bytes(s, n * (bf16 ? 2 : 4), "src");
    require_bytes(d, rows * shmoe_mx_row_bytes(cols), "out");
    const shmoe_fp8_format_t f = fp8_format_named(format);
    const int rc = released([&] {
      return bf16 ? shmoe_mx_quantize_bf16_rows(s.as<std::uint16_t>(), rows, cols, f,
                                                d.as<std::uint8_t>())
                  : shmoe_mx_quantize_rows(s.as<float>(), rows, cols, f, d.as<std::uint8_t>());
    });
    if (rc != 0) throw Refused(shmoe_moe_last_error());
  });
  // DeepEP's FP8 token rows: cols E4M3 codes, then cols / 128 float32 scales.
  m.def("fp8_token_row_bytes", [](int cols) { return shmoe_fp8_token_row_bytes(cols); });
  // rows x cols bfloat16 bits -> rows of fp8_token_row_bytes(cols).
  m.def("quantize_fp8_token_rows", [](const py::buffer& src, std::size_t rows, int cols,
                                      bool round_scale, const py::buffer& out) {
    const Bytes s = bytes_of(src, "src"), d = bytes_of(out, "out", true);
    require_bytes(s, rows * static_cast<std::size_t>(cols > 0 ? cols : 0) * 2, "src");
    require_bytes(d, rows * shmoe_fp8_token_row_bytes(cols), "out");
    const int rc = released([&] {
      return shmoe_fp8_quantize_token_rows(s.as<std::uint16_t>(), rows, cols, round_scale,
                                           d.as<std::uint8_t>());
    });
    if (rc != 0) throw Refused(shmoe_moe_last_error());
  });
  // Such rows -> values (E4M3 values as bfloat16 bits) [rows, cols] and scales [rows, cols/128].
  m.def("unpack_fp8_token_rows", [](const py::buffer& src, std::size_t rows, int cols,
                                    const py::buffer& values, const py::buffer& scales) {
    const Bytes s = bytes_of(src, "src"), v = bytes_of(values, "values", true),
                sc = bytes_of(scales, "scales", true);
    const std::size_t n = rows * static_cast<std::size_t>(cols > 0 ? cols : 0);
    require_bytes(s, rows * shmoe_fp8_token_row_bytes(cols), "src");
    require_bytes(v, n * 2, "values");
    require_bytes(sc, n / 128 * 4, "scales");
    const int rc = released([&] {
      return shmoe_fp8_unpack_token_rows(s.as<std::uint8_t>(), rows, cols, v.as<std::uint16_t>(),
                                         sc.as<float>());
    });
    if (rc != 0) throw Refused(shmoe_moe_last_error());
  });
  // The inverse: rows of mx_row_bytes(cols) -> rows x cols float32.
  m.def("dequantize_mx_rows", [](const py::buffer& src, std::size_t rows, int cols,
                                 const std::string& format, const py::buffer& out) {
    const Bytes s = bytes_of(src, "src"), d = bytes_of(out, "out", true);
    require_bytes(s, rows * shmoe_mx_row_bytes(cols), "src");
    require_bytes(d, rows * static_cast<std::size_t>(cols > 0 ? cols : 0) * 4, "out");
    const shmoe_fp8_format_t f = fp8_format_named(format);
    const int rc = released([&] {
      return shmoe_mx_dequantize_rows(s.as<std::uint8_t>(), rows, cols, f, d.as<float>());
    });
    if (rc != 0) throw Refused(shmoe_moe_last_error());
  });
}

}  // namespace shmoe::python
