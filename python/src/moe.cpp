// The MoE dispatch and combine operators (shmoe::MoeBuffer of shmoe/moe.hpp) as the class
// MoeBuffer, one function per method, and the MX FP8 row helpers that FP8 dispatch and
// MegaMoE's weights use.
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
  throw Error("MoeBuffer: dtype '" + name + "' is not one of int32, float16, bfloat16, float32");
}

// Refuses an array smaller than the call reads or writes (the package sizes them; this keeps a
// mistake there from becoming a write past an array).
void require_bytes(const Bytes& b, std::size_t need, const char* param) {
  if (b.data != nullptr && b.size < need) {
    throw Error(std::string(param) + " holds " + std::to_string(b.size) +
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

std::unique_ptr<Buffer> make_buffer(int num_experts_per_pe, int max_tokens_per_pe, int hidden,
                                    int num_topk, const std::string& dtype,
                                    std::size_t max_recv_rows, int matrix_workers,
                                    int vector_workers, std::size_t double_plane_threshold,
                                    int token_side_bytes, int header_ints, int shrink_timeout_ms,
                                    int recv_blocks) {
  const DTypeInfo t = dtype_named(dtype);
  MoeConfig c;
  c.num_experts_per_pe = num_experts_per_pe;
  c.max_tokens_per_pe = max_tokens_per_pe;
  c.hidden = hidden;
  c.num_topk = num_topk;
  c.dtype = t.code;
  c.max_recv_rows = max_recv_rows;
  c.matrix_workers = matrix_workers;
  c.vector_workers = vector_workers;
  c.double_plane_threshold = double_plane_threshold;
  c.token_side_bytes = token_side_bytes;
  c.header_ints = header_ints;
  c.shrink_timeout_ms = shrink_timeout_ms;
  c.recv_blocks = recv_blocks;
  return std::make_unique<Buffer>(c, t.bytes);
}

py::capsule RecvBlockLender::lend(const std::shared_ptr<RecvBlockLender>& self, int block) {
  using Owner = std::pair<std::shared_ptr<RecvBlockLender>, int>;
  return py::capsule(new Owner(self, block), [](void* p) {
    const std::unique_ptr<Owner> owner(static_cast<Owner*>(p));
    RecvBlockLender& l = *owner->first;
    const std::lock_guard lock(l.mutex_);
    if (l.retired_) return;
    try {
      l.op_->release_block(owner->second);  // local; refused only for a block not held
    } catch (const std::exception&) {
      // Only this capsule gives its block back, so it is held.
    }
  });
}

namespace {

// Collective: whether any PE passes `held` > 0 (true where the heap has no room to find out).
bool held_anywhere(int held) {
  auto* v = static_cast<int*>(shmem_malloc(2 * sizeof(int)));
  if (v == nullptr) return true;  // alike on every PE: every heap had the same allocations
  v[0] = held;
  shmem_int_max_reduce(SHMEM_TEAM_WORLD, v + 1, v, 1);
  const bool any = v[1] > 0;
  shmem_free(v);
  return any;
}

}  // namespace

void Buffer::close() {
  if (lender_) {
    bool held = true;
    try {
      held = released([&] { return held_anywhere(get().held_blocks()); });
    } catch (const Error&) {
      // Closed already: nothing to give up.
    }
    lender_->retire();
    if (held) return Collective::abandon();
  }
  Collective::close();
}

namespace {

py::memoryview receive_window(Buffer& b) {
  void* w = b.get().receive_window();
  return py::memoryview::from_memory(w, static_cast<py::ssize_t>(b.capacity() * b.row_bytes()));
}

// A dispatch's inputs, each array checked against the sizes the call reads.
DispatchArgs dispatch_args(Buffer& b, const py::buffer& x, const py::buffer& topk_idx,
                           const py::object& topk_weights, int num_tokens,
                           const py::object& token_side, const py::object& header_ints) {
  const std::size_t tokens = num_tokens > 0 ? static_cast<std::size_t>(num_tokens) : 0;
  const std::size_t routes = tokens * static_cast<std::size_t>(b.num_topk());
  const Bytes in = bytes_of(x, "x"), ids = bytes_of(topk_idx, "topk_idx");
  const Bytes w = bytes_or_null(topk_weights, "topk_weights");
  const Bytes side_in = bytes_or_null(token_side, "token_side");
  const Bytes ints_in = bytes_or_null(header_ints, "header_ints");
  require_bytes(in, tokens * b.row_bytes(), "x");
  require_bytes(ids, routes * 4, "topk_idx");
  require_bytes(w, routes * 4, "topk_weights");
  require_bytes(side_in, tokens * b.token_side_bytes(), "token_side");
  require_bytes(ints_in, b.header_ints() * 4, "header_ints");
  DispatchArgs a;
  a.x = in.data;
  a.topk_idx = ids.as<std::int32_t>();
  a.topk_weights = w.as<float>();
  a.num_tokens = num_tokens;
  a.token_side = side_in.data;
  a.header_ints = ints_in.as<std::int32_t>();
  return a;
}

// A dispatch's outputs, each array checked against the sizes the call writes.
DispatchOutputs dispatch_outputs(Buffer& b, const py::buffer& recv_x,
                                 const py::buffer& recv_src_info,
                                 const py::buffer& recv_layout_prefix,
                                 const py::buffer& num_recv_tokens_per_expert,
                                 const py::object& recv_weights, const py::object& recv_token_side,
                                 const py::object& all_header_ints, const py::object& all_counts) {
  const std::size_t cap = b.capacity(), pes = static_cast<std::size_t>(shmem_n_pes());
  const std::size_t experts = static_cast<std::size_t>(b.num_experts_per_pe());
  const Bytes rows = bytes_of(recv_x, "recv_x", true);
  const Bytes src = bytes_of(recv_src_info, "recv_src_info", true);
  const Bytes prefix = bytes_of(recv_layout_prefix, "recv_layout_prefix", true);
  const Bytes nums = bytes_of(num_recv_tokens_per_expert, "num_recv_tokens_per_expert", true);
  const Bytes weights = bytes_or_null(recv_weights, "recv_weights", true);
  const Bytes side = bytes_or_null(recv_token_side, "recv_token_side", true);
  const Bytes ints = bytes_or_null(all_header_ints, "all_header_ints", true);
  const Bytes counts = bytes_or_null(all_counts, "all_counts", true);
  require_bytes(rows, cap * b.row_bytes(), "recv_x");
  require_bytes(src, cap * 12, "recv_src_info");
  require_bytes(prefix, experts * pes * 4, "recv_layout_prefix");
  require_bytes(nums, experts * 4, "num_recv_tokens_per_expert");
  require_bytes(weights, cap * 4, "recv_weights");
  require_bytes(side, cap * b.token_side_bytes(), "recv_token_side");
  require_bytes(ints, pes * b.header_ints() * 4, "all_header_ints");
  require_bytes(counts, pes * pes * experts * 4, "all_counts");
  DispatchOutputs o;
  o.recv_x = rows.data;
  o.recv_src_info = src.as<std::int32_t>();
  o.recv_layout_prefix = prefix.as<std::int32_t>();
  o.num_recv_tokens_per_expert = nums.as<std::int32_t>();
  o.recv_weights = weights.as<float>();
  o.recv_token_side = side.data;
  o.all_header_ints = ints.as<std::int32_t>();
  o.all_counts = counts.as<std::int32_t>();
  return o;
}

// Returns the rows received, or -1 on every PE when some PE's verdict was retry (2).
int dispatch(Buffer& b, bool double_plane, const py::buffer& x, const py::buffer& topk_idx,
             const py::object& topk_weights, int num_tokens, const py::buffer& recv_x,
             const py::buffer& recv_src_info, const py::buffer& recv_layout_prefix,
             const py::buffer& num_recv_tokens_per_expert, const py::object& recv_weights,
             const py::object& token_side, const py::object& header_ints, int verdict,
             const py::object& recv_token_side, const py::object& all_header_ints,
             const py::object& all_counts, const py::object& pe_mask) {
  MoeBuffer& op = b.get();
  std::int32_t* const mask = pe_mask_of(pe_mask);
  if (verdict < SHMOE_CALL_PROCEED || verdict > SHMOE_CALL_RETRY) {
    throw Error("MoeBuffer.dispatch: verdict=" + std::to_string(verdict) +
                " is out of range (0 proceed, 1 refuse, 2 retry)");
  }
  DispatchArgs args;
  DispatchOutputs outs;
  if (verdict == SHMOE_CALL_PROCEED) {  // otherwise the operator reads no other argument
    args = dispatch_args(b, x, topk_idx, topk_weights, num_tokens, token_side, header_ints);
    outs =
        dispatch_outputs(b, recv_x, recv_src_info, recv_layout_prefix, num_recv_tokens_per_expert,
                         recv_weights, recv_token_side, all_header_ints, all_counts);
  }
  args.plane = plane_of(double_plane);
  args.verdict = static_cast<shmoe_call_verdict_t>(verdict);
  args.pe_mask = mask;
  return released([&] { return op.dispatch(args, outs); });
}

// combined_x_float32: combined_x gets the fp32 sums; caller_mode: 0..127, alike on every PE;
// verdict 1: this PE refuses the call (every PE's raises; no other input is read).
void combine(Buffer& b, bool double_plane, const py::buffer& x, const py::buffer& src_info,
             const py::buffer& layout_prefix, const py::buffer& topk_idx,
             const py::buffer& topk_weights, int num_tokens, const py::buffer& combined_x,
             bool combined_x_float32, int caller_mode, int verdict, const py::object& pe_mask) {
  MoeBuffer& op = b.get();
  CombineArgs args;
  args.plane = plane_of(double_plane);
  args.verdict = static_cast<shmoe_call_verdict_t>(verdict);
  args.pe_mask = pe_mask_of(pe_mask);
  if (verdict == SHMOE_CALL_PROCEED) {  // otherwise the operator reads nothing else
    const std::size_t tokens = num_tokens > 0 ? static_cast<std::size_t>(num_tokens) : 0;
    const std::size_t routes = tokens * static_cast<std::size_t>(b.num_topk());
    const Bytes rows = bytes_of(x, "x"), src = bytes_of(src_info, "src_info");
    const Bytes prefix = bytes_of(layout_prefix, "layout_prefix");
    const Bytes ids = bytes_of(topk_idx, "topk_idx"), w = bytes_of(topk_weights, "topk_weights");
    const Bytes out = bytes_of(combined_x, "combined_x", true);
    require_bytes(ids, routes * 4, "topk_idx");
    require_bytes(w, routes * 4, "topk_weights");
    const std::size_t hidden = static_cast<std::size_t>(b.hidden());
    require_bytes(out, tokens * (combined_x_float32 ? hidden * 4 : b.row_bytes()), "combined_x");
    args.x = rows.data;
    args.src_info = src.as<std::int32_t>();
    args.layout_prefix = prefix.as<std::int32_t>();
    args.topk_idx = ids.as<std::int32_t>();
    args.topk_weights = w.as<float>();
    args.num_tokens = num_tokens;
    args.combined_x = out.data;
    args.combined_x_float32 = combined_x_float32 ? 1 : 0;
    args.caller_mode = caller_mode;
  }
  released([&] { op.combine(args); });
}

void sync_live(Buffer& b, const py::buffer& pe_mask) {
  MoeBuffer& op = b.get();
  std::int32_t* const mask = pe_mask_of(pe_mask);
  released([&] { op.sync_live(mask); });
}

void rejoin(Buffer& b, const py::buffer& pe_mask, const py::list& others) {
  MoeBuffer& op = b.get();
  std::int32_t* const mask = pe_mask_of(pe_mask);
  std::vector<shmoe_moe_buffer_t> handles;
  for (const py::handle o : others) handles.push_back(o.cast<Buffer&>().get().handle());
  released([&] { op.rejoin(mask, handles); });
}

py::array_t<double> last_source_waits(Buffer& b) {
  const std::vector<double> us = b.get().last_source_waits();
  py::array_t<double> out(static_cast<py::ssize_t>(us.size()));
  std::copy(us.begin(), us.end(), out.mutable_data());
  return out;
}

py::dict last_timing(Buffer& b) {
  const MoeTiming t = b.get().last_timing();
  py::dict d;
  d["worker_us"] = t.worker_us_max;
  d["workers"] = t.workers;
  d["comm_us"] = t.comm_us;
  d["bytes_sent"] = t.bytes_sent;
  d["bytes_via_copy_engine"] = t.bytes_via_copy_engine;
  d["rows_received"] = t.rows_received;
  return d;
}

void bind_buffer(py::module_& m) {
  py::class_<HostBlock>(m, "HostBlock", py::buffer_protocol()).def_buffer(&HostBlock::info);
  py::class_<Buffer>(m, "MoeBuffer")
      .def(py::init(&make_buffer), py::arg("num_experts_per_pe"), py::arg("max_tokens_per_pe"),
           py::arg("hidden"), py::arg("num_topk"), py::arg("dtype"), py::arg("max_recv_rows"),
           py::arg("matrix_workers"), py::arg("vector_workers"), py::arg("double_plane_threshold"),
           py::arg("token_side_bytes") = 0, py::arg("header_ints") = 0,
           py::arg("shrink_timeout_ms") = 0, py::arg("recv_blocks") = 0)
      .def("recv_capacity", &Buffer::capacity)
      // recv_capacity rows of host memory for a dispatch's output, from the buffer's pool.
      .def("take_rows", &Buffer::take_rows)
      // max_tokens_per_pe rows of host memory for a combine's output, from a second pool.
      .def("take_token_rows", &Buffer::take_token_rows)
      // The receive window's bytes (recv_capacity rows), where dispatch's rows land.
      .def("receive_window", &receive_window)
      .def("dispatch", &dispatch, py::arg("double_plane"), py::arg("x"), py::arg("topk_idx"),
           py::arg("topk_weights"), py::arg("num_tokens"), py::arg("recv_x"),
           py::arg("recv_src_info"), py::arg("recv_layout_prefix"),
           py::arg("num_recv_tokens_per_expert"), py::arg("recv_weights"),
           py::arg("token_side") = py::none(), py::arg("header_ints") = py::none(),
           py::arg("verdict") = 0, py::arg("recv_token_side") = py::none(),
           py::arg("all_header_ints") = py::none(), py::arg("all_counts") = py::none(),
           py::arg("pe_mask") = py::none())
      .def("combine", &combine, py::arg("double_plane"), py::arg("x"), py::arg("src_info"),
           py::arg("layout_prefix"), py::arg("topk_idx"), py::arg("topk_weights"),
           py::arg("num_tokens"), py::arg("combined_x"), py::arg("combined_x_float32") = false,
           py::arg("caller_mode") = 0, py::arg("verdict") = 0, py::arg("pe_mask") = py::none())
      // Shrink mode: a barrier of the PEs pe_mask has live; masks those that miss the bound.
      .def("sync_live", &sync_live, py::arg("pe_mask"))
      // Shrink mode: every PE, masked or not, meets; those in time are unmasked and go on, with
      // the buffers of `others`, from the same call counters.
      .def("rejoin", &rejoin, py::arg("pe_mask"), py::arg("others"))
      // This PE's row of the wait matrix of the last call: microseconds it waited for each PE.
      .def("last_source_waits", &last_source_waits)
      .def("last_timing", &last_timing)
      .def("close", &Buffer::close)
      .def("abandon", &Buffer::abandon);
}

}  // namespace

void bind_moe(py::module_& m) {
  bind_buffer(m);
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
    if (rc != 0) throw Error(shmoe_moe_last_error());
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
    if (rc != 0) throw Error(shmoe_moe_last_error());
  });
}

}  // namespace shmoe::python
