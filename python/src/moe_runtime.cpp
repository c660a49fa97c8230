// shmoe.MoeBuffer's runtime (the class MoeRuntime): the package's constructor, dispatch and
// combine as one call each, with every argument check here. The package only converts (torch
// tensors to numpy views, dtypes to names) and wraps the results; each call checks its arguments
// against the buffer, then agrees through the library (shmoe::agree), so that a refusal on any PE
// is a refusal on every PE, then calls the operator. In shrink mode the calls agree on nothing
// beforehand (that would wait for a lost PE): a PE whose arguments are wrong raises alone, and
// the others mask it.
#include <fmt/format.h>
#include <pybind11/numpy.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "call_checks.hpp"
#include "moe_buffer.hpp"

namespace shmoe::python {
namespace {

constexpr const char* kDTypes[] = {"float32", "bfloat16", "float16", "int32"};

// One dispatch's record, what a combine needs of it: where each received row came from, and
// the routing of this PE's tokens.
struct DispatchRecord {
  py::object owner;  // the MoeRuntime that dispatched
  int rows = 0;
  int num_tokens = 0;
  py::array_t<std::int32_t> src_info;       // [capacity, 3]
  py::array_t<std::int32_t> layout_prefix;  // [L * n_pes]
  py::array_t<std::int32_t> topk_idx;       // [num_tokens, num_topk]
  py::object topk_weights;                  // float32 [num_tokens, num_topk] or None
};

class MoeRuntime {
 public:
  struct Options {
    int max_tokens_per_pe, hidden, num_experts, num_topk;
    std::string dtype, fp8;
    bool double_plane;
    long long double_plane_threshold, max_recv_rows;
    int matrix_workers, vector_workers, token_side_bytes, header_ints, shrink_timeout_ms;
    int recv_blocks;
  };

  explicit MoeRuntime(const Options& o) : o_(o) {
    check_options();
    const int L = o_.num_experts / shmem_n_pes();
    // Receive blocks where dispatch's rows land: the FP8 operator's, with fp8.
    operator_ = operator_of(L, o_.hidden, o_.dtype, o_.token_side_bytes, o_.header_ints,
                            o_.fp8.empty() ? o_.recv_blocks : 0);
    op_ = &operator_.cast<Buffer&>();
    if (!o_.fp8.empty()) {
      fp8_row_ = shmoe_mx_row_bytes(o_.hidden);
      fp8_operator_ = operator_of(L, static_cast<int>(fp8_row_ / 4), "int32", 0, 0, o_.recv_blocks);
      fp8_op_ = &fp8_operator_.cast<Buffer&>();
      quantized_.resize(static_cast<std::size_t>(o_.max_tokens_per_pe) * fp8_row_);
    }
  }

  py::object operator_object() const { return operator_; }
  py::object fp8_operator_object() const { return fp8_operator_; }
  std::size_t recv_capacity() const { return op_->capacity(); }
  // (results in receive blocks, results copied out of the window) of this runtime's dispatches.
  py::tuple result_counts() const {
    const Buffer& b = fp8_op_ != nullptr ? *fp8_op_ : *op_;
    const ResultCounts& c = b.result_counts();
    return py::make_tuple(c.in_blocks, c.copied);
  }
  const Options& options() const { return o_; }

  // (rows, received bytes, src_info, layout_prefix, tokens per local expert, each row's weight,
  // the record for combine).
  py::tuple dispatch(const py::object& x, const std::string& x_dtype, const py::object& topk_idx,
                     const std::string& idx_dtype, const py::object& topk_weights,
                     const std::string& w_dtype, bool zero_copy, const py::object& pe_mask) {
    Refusal r("MoeBuffer.dispatch");
    std::int32_t* mask = checked_mask(r, pe_mask);
    if (shrink() && zero_copy) {
      r.refuse(
          "zero_copy=True in shrink mode: the receive window holds fixed slots, and rows "
          "are copied out of it");
    }
    const Array xs = array_of(x, x_dtype, "x");
    check_payload(r, xs, o_.dtype, {{o_.max_tokens_per_pe, "max_tokens_per_pe"}, {o_.hidden}});
    const py::ssize_t tokens = xs.info.ndim == 2 ? xs.info.shape[0] : 0;
    const Array idx = array_of(topk_idx, idx_dtype, "topk_idx");
    if (!is_integer(idx.dtype)) {
      r.refuse(fmt::format("topk_idx has dtype {}; expert indices are integers", idx.dtype));
    }
    r.shape(idx, {{tokens}, {o_.num_topk}});
    if (!topk_weights.is_none()) {
      const Array w = array_of(topk_weights, w_dtype, "topk_weights");
      if (!is_float(w.dtype)) {
        r.refuse(fmt::format("topk_weights has dtype {}; weights are floating point", w.dtype));
      }
      r.shape(w, {{tokens}, {o_.num_topk}});
    }
    r.settle(shrink());
    return call_dispatch(xs, indices_int32(idx), topk_weights, zero_copy, mask);
  }

  // combined_x [num_tokens, hidden] of the buffer's dtype (uint16 bit patterns for bfloat16).
  py::array combine(const py::object& y, const std::string& y_dtype, const py::object& record,
                    const py::object& topk_weights, const std::string& w_dtype,
                    const py::object& pe_mask) {
    Refusal r("MoeBuffer.combine");
    std::int32_t* mask = checked_mask(r, pe_mask);
    DispatchRecord* d = record.is_none() ? nullptr : &record.cast<DispatchRecord&>();
    if (shrink() && d != nullptr && !d->owner.is(self())) {
      r.refuse("in shrink mode handle must come from this buffer's last dispatch");
    }
    if (d == nullptr || !routes_like(d->owner)) {
      r.refuse(
          "handle must be what a dispatch of this buffer (or of an open one with the same "
          "experts, top-k and capacity) returned");
    }
    const Array ys = array_of(y, y_dtype, "y");
    py::object weights = topk_weights;
    if (d != nullptr) {
      check_payload(r, ys, o_.dtype, {{d->rows}, {o_.hidden}});
      if (topk_weights.is_none()) {
        if (d->topk_weights.is_none()) r.refuse("topk_weights is None, and so was the dispatch's");
        weights = d->topk_weights;
      } else {
        const Array w = array_of(topk_weights, w_dtype, "topk_weights");
        if (!is_float(w.dtype)) {
          r.refuse(fmt::format("topk_weights has dtype {}; weights are floating point", w.dtype));
        }
        r.shape(w, {{d->num_tokens}, {o_.num_topk}});
      }
    }
    r.settle(shrink());
    return call_combine(*d, ys, weights, mask);
  }

  bool closed() const { return closed_; }
  void close() {
    if (closed_) return;
    closed_ = true;
    if (fp8_op_ != nullptr) fp8_op_->close();
    op_->close();
  }
  void abandon() {
    if (closed_) return;
    closed_ = true;
    if (fp8_op_ != nullptr) fp8_op_->abandon();
    op_->abandon();
  }

 private:
  bool shrink() const { return o_.shrink_timeout_ms > 0; }
  // This runtime as Python holds it (pybind11 finds the registered instance).
  py::object self() const { return py::cast(this, py::return_value_policy::reference); }

  void check_options() const;
  py::object operator_of(int L, int hidden, const std::string& dtype, int side, int ints,
                         int recv_blocks) const;
  std::int32_t* checked_mask(Refusal& r, const py::object& pe_mask) const;
  bool routes_like(const py::object& other) const;
  py::tuple call_dispatch(const Array& xs, const std::vector<std::int32_t>& idx,
                          const py::object& weights, bool zero_copy, std::int32_t* mask);
  py::array call_combine(const DispatchRecord& d, const Array& ys, const py::object& weights,
                         std::int32_t* mask);

  Options o_;
  py::object operator_, fp8_operator_ = py::none();
  Buffer* op_ = nullptr;
  Buffer* fp8_op_ = nullptr;
  std::size_t fp8_row_ = 0;
  std::vector<std::uint8_t> quantized_;
  bool closed_ = false;
};

void MoeRuntime::check_options() const {
  Refusal r("shmoe.MoeBuffer");
  const int n = shmem_n_pes();
  check_range(r, "max_tokens_per_pe", o_.max_tokens_per_pe, 1);
  check_range(r, "hidden", o_.hidden, 1);
  check_range(r, "num_experts", o_.num_experts, 1);
  if (o_.num_experts >= 1 && o_.num_experts % n != 0) {
    r.refuse(fmt::format("num_experts={} is not divisible by the {} PEs", o_.num_experts, n));
  }
  check_range(r, "num_topk", o_.num_topk, 1);
  if (o_.num_experts >= 1 && o_.num_topk > o_.num_experts) {
    r.refuse(fmt::format("num_topk={} is more than num_experts={}", o_.num_topk, o_.num_experts));
  }
  bool known = false;
  for (const char* t : kDTypes) known = known || o_.dtype == t;
  if (!known) {
    r.refuse(fmt::format("dtype {} is not one of float32, bfloat16, float16, int32", o_.dtype));
  }
  if (!o_.fp8.empty() && o_.fp8 != "e4m3" && o_.fp8 != "e5m2") {
    r.refuse(fmt::format("fp8='{}' is not one of e4m3, e5m2", o_.fp8));
  } else if (!o_.fp8.empty() && o_.dtype != "bfloat16") {
    r.refuse(fmt::format("fp8='{}' quantizes bfloat16 tokens; dtype is {}", o_.fp8, o_.dtype));
  }
  check_range(r, "double_plane_threshold", o_.double_plane_threshold, 0);
  check_range(r, "max_recv_rows", o_.max_recv_rows, 0);
  if (o_.matrix_workers < 0 || o_.vector_workers < 0) {
    r.refuse(fmt::format("workers=({}, {}) must be (matrix, vector) counts", o_.matrix_workers,
                         o_.vector_workers));
  }
  check_range(r, "token_side_bytes", o_.token_side_bytes, 0);
  check_range(r, "header_ints", o_.header_ints, 0);
  // The upper bound (below SHMOE_HANG_TIMEOUT) is the operator's to check.
  check_range(r, "shrink_timeout_ms", o_.shrink_timeout_ms, 0);
  if (o_.shrink_timeout_ms > 0 && !o_.fp8.empty()) {
    r.refuse(
        fmt::format("fp8='{}' with shrink_timeout_ms={}: shrink mode's combine must follow a "
                    "dispatch on its own operator, and FP8 rows go through another",
                    o_.fp8, o_.shrink_timeout_ms));
  }
  r.settle(false);  // creation is collective, in shrink mode too
}

py::object MoeRuntime::operator_of(int L, int hidden, const std::string& dtype, int side, int ints,
                                   int recv_blocks) const {
  return py::cast(python::make_buffer(L, o_.max_tokens_per_pe, hidden, o_.num_topk, dtype,
                                      static_cast<std::size_t>(o_.max_recv_rows), o_.matrix_workers,
                                      o_.vector_workers,
                                      static_cast<std::size_t>(o_.double_plane_threshold), side,
                                      ints, o_.shrink_timeout_ms, recv_blocks));
}

// Shrink mode's pe_mask (int32 [n_pes], written by the call), required there and refused
// elsewhere.
std::int32_t* MoeRuntime::checked_mask(Refusal& r, const py::object& pe_mask) const {
  const int n = shmem_n_pes();
  if (!shrink()) {
    if (!pe_mask.is_none()) {
      r.refuse("pe_mask is given, but the buffer is not in shrink mode (shrink_timeout_ms=0)");
    }
    return nullptr;
  }
  if (pe_mask.is_none()) {
    r.refuse(
        fmt::format("the buffer is in shrink mode: pass pe_mask, an int32 array of the {} "
                    "PEs (nonzero: masked)",
                    n));
    return nullptr;
  }
  const py::buffer_info m = pe_mask.cast<py::buffer>().request(true);
  const std::string dtype = py::str(pe_mask.attr("dtype").attr("name"));
  if (dtype != "int32" || m.ndim != 1 || m.shape[0] != n) {
    r.refuse(fmt::format("pe_mask is {}[{}]; it must be int32[{}] (one entry per PE)", dtype,
                         fmt::join(m.shape, ", "), n));
    return nullptr;
  }
  return static_cast<std::int32_t*>(m.ptr);
}

bool MoeRuntime::routes_like(const py::object& other) const {
  if (other.is(self())) return true;
  const MoeRuntime& o = other.cast<const MoeRuntime&>();
  return !o.closed_ && o.o_.num_experts == o_.num_experts && o.o_.num_topk == o_.num_topk &&
         o.o_.max_tokens_per_pe == o_.max_tokens_per_pe && o.recv_capacity() == recv_capacity();
}

py::tuple MoeRuntime::call_dispatch(const Array& xs, const std::vector<std::int32_t>& idx,
                                    const py::object& weights, bool zero_copy, std::int32_t* mask) {
  const int tokens = static_cast<int>(xs.info.shape[0]);
  Buffer& b = fp8_op_ != nullptr ? *fp8_op_ : *op_;
  const std::size_t cap = b.capacity(), P = static_cast<std::size_t>(shmem_n_pes());
  const std::size_t L = static_cast<std::size_t>(b.num_experts_per_pe());
  py::array_t<std::int32_t> src_info({static_cast<py::ssize_t>(cap), py::ssize_t{3}});
  py::array_t<std::int32_t> prefix(static_cast<py::ssize_t>(L * P));
  py::array_t<std::int32_t> counts(static_cast<py::ssize_t>(L));
  py::array_t<float> row_weights(static_cast<py::ssize_t>(cap));
  const std::size_t bytes = cap * b.row_bytes();
  // Where the rows land: the receive window (zero_copy), a free receive block the senders write
  // (no copy), or the window, copied out into a host block.
  const bool in_block = !zero_copy && b.lender() && b.lender()->has_free();
  py::array_t<std::uint8_t> recv;
  if (zero_copy) {
    recv = py::array_t<std::uint8_t>(static_cast<py::ssize_t>(bytes),
                                     static_cast<std::uint8_t*>(b.get().receive_window()), self());
  } else if (!in_block) {
    py::object block = py::cast(b.take_rows());
    recv = py::array_t<std::uint8_t>(
        static_cast<py::ssize_t>(bytes),
        static_cast<std::uint8_t*>(block.cast<HostBlock&>().info().ptr), block);
  }
  const void* source = xs.info.ptr;
  if (fp8_op_ != nullptr) {
    const int rc = released([&] {
      return shmoe_mx_quantize_bf16_rows(static_cast<const std::uint16_t*>(xs.info.ptr),
                                         static_cast<std::size_t>(tokens), o_.hidden,
                                         fp8_format_named(o_.fp8), quantized_.data());
    });
    if (rc != 0) throw Error(shmoe_moe_last_error());
    source = quantized_.data();
  }
  DispatchArgs args;
  args.plane = o_.double_plane ? SHMOE_PLANE_DOUBLE : SHMOE_PLANE_CLASSIC;
  args.x = source;
  args.topk_idx = idx.data();
  args.topk_weights = weights.is_none()
                          ? nullptr
                          : static_cast<const float*>(weights.cast<py::buffer>().request().ptr);
  args.num_tokens = tokens;
  args.pe_mask = mask;
  DispatchOutputs outs;
  std::int32_t block = -1;
  void* block_rows = nullptr;
  if (in_block) {
    outs.recv_block = &block;
    outs.recv_block_x = &block_rows;
  } else {
    outs.recv_x = recv.mutable_data();
  }
  outs.recv_src_info = src_info.mutable_data();
  outs.recv_layout_prefix = prefix.mutable_data();
  outs.num_recv_tokens_per_expert = counts.mutable_data();
  outs.recv_weights = row_weights.mutable_data();
  MoeBuffer& op = b.get();
  const int rows = released([&] { return op.dispatch(args, outs); });
  if (in_block) {
    recv = py::array_t<std::uint8_t>(static_cast<py::ssize_t>(bytes),
                                     static_cast<std::uint8_t*>(block_rows),
                                     RecvBlockLender::lend(b.lender(), block));
  }
  if (!zero_copy) ++(in_block ? b.result_counts().in_blocks : b.result_counts().copied);

  auto record = std::make_unique<DispatchRecord>();
  record->owner = self();
  record->rows = rows;
  record->num_tokens = tokens;
  record->src_info = src_info;
  record->layout_prefix = prefix;
  py::array_t<std::int32_t> idx_out(
      {static_cast<py::ssize_t>(tokens), static_cast<py::ssize_t>(o_.num_topk)});
  std::copy(idx.begin(), idx.end(), idx_out.mutable_data());
  record->topk_idx = idx_out;
  record->topk_weights = weights;
  return py::make_tuple(rows, recv, src_info, prefix, counts, row_weights,
                        py::cast(std::move(record)));
}

py::array MoeRuntime::call_combine(const DispatchRecord& d, const Array& ys,
                                   const py::object& weights, std::int32_t* mask) {
  py::array out(o_.dtype == "float32"   ? py::dtype::of<float>()
                : o_.dtype == "int32"   ? py::dtype::of<std::int32_t>()
                : o_.dtype == "float16" ? py::dtype("float16")
                                        : py::dtype::of<std::uint16_t>(),
                std::vector<py::ssize_t>{d.num_tokens, o_.hidden});
  CombineArgs args;
  args.plane = o_.double_plane ? SHMOE_PLANE_DOUBLE : SHMOE_PLANE_CLASSIC;
  args.x = ys.info.ptr;
  args.src_info = d.src_info.data();
  args.layout_prefix = d.layout_prefix.data();
  args.topk_idx = d.topk_idx.data();
  args.topk_weights = static_cast<const float*>(weights.cast<py::buffer>().request().ptr);
  args.num_tokens = d.num_tokens;
  args.combined_x = out.mutable_data();
  args.pe_mask = mask;
  MoeBuffer& op = op_->get();
  released([&] { op.combine(args); });
  return out;
}

MoeRuntime::Options options_of(int max_tokens_per_pe, int hidden, int num_experts, int num_topk,
                               const std::string& dtype, bool double_plane,
                               long long double_plane_threshold, const std::string& fp8,
                               long long max_recv_rows, int matrix_workers, int vector_workers,
                               int token_side_bytes, int header_ints, int shrink_timeout_ms,
                               int recv_blocks) {
  return {max_tokens_per_pe,
          hidden,
          num_experts,
          num_topk,
          dtype,
          fp8,
          double_plane,
          double_plane_threshold,
          max_recv_rows,
          matrix_workers,
          vector_workers,
          token_side_bytes,
          header_ints,
          shrink_timeout_ms,
          recv_blocks};
}

}  // namespace

void bind_moe_runtime(py::module_& m) {
  py::class_<DispatchRecord>(m, "DispatchRecord")
      .def_readonly("rows", &DispatchRecord::rows)
      .def_readonly("num_tokens", &DispatchRecord::num_tokens)
      .def_readonly("src_info", &DispatchRecord::src_info)
      .def_readonly("layout_prefix", &DispatchRecord::layout_prefix)
      .def_readonly("topk_idx", &DispatchRecord::topk_idx)
      .def_readonly("topk_weights", &DispatchRecord::topk_weights)
      .def_readonly("owner", &DispatchRecord::owner);
  py::class_<MoeRuntime>(m, "MoeRuntime")
      .def(
          py::init([](int max_tokens_per_pe, int hidden, int num_experts, int num_topk,
                      const std::string& dtype, bool double_plane, long long double_plane_threshold,
                      const std::string& fp8, long long max_recv_rows, int matrix_workers,
                      int vector_workers, int token_side_bytes, int header_ints,
                      int shrink_timeout_ms, int recv_blocks) {
            return std::make_unique<MoeRuntime>(options_of(
                max_tokens_per_pe, hidden, num_experts, num_topk, dtype, double_plane,
                double_plane_threshold, fp8, max_recv_rows, matrix_workers, vector_workers,
                token_side_bytes, header_ints, shrink_timeout_ms, recv_blocks));
          }),
          py::arg("max_tokens_per_pe"), py::arg("hidden"), py::arg("num_experts"),
          py::arg("num_topk"), py::arg("dtype"), py::arg("double_plane"),
          py::arg("double_plane_threshold"), py::arg("fp8"), py::arg("max_recv_rows"),
          py::arg("matrix_workers"), py::arg("vector_workers"), py::arg("token_side_bytes"),
          py::arg("header_ints"), py::arg("shrink_timeout_ms"), py::arg("recv_blocks"))
      .def_property_readonly("operator", &MoeRuntime::operator_object)
      .def_property_readonly("fp8_operator", &MoeRuntime::fp8_operator_object)
      .def_property_readonly("recv_capacity", &MoeRuntime::recv_capacity)
      .def_property_readonly("closed", &MoeRuntime::closed)
      .def("result_counts", &MoeRuntime::result_counts)
      .def("dispatch", &MoeRuntime::dispatch, py::arg("x"), py::arg("x_dtype"), py::arg("topk_idx"),
           py::arg("idx_dtype"), py::arg("topk_weights"), py::arg("w_dtype"), py::arg("zero_copy"),
           py::arg("pe_mask"))
      .def("combine", &MoeRuntime::combine, py::arg("y"), py::arg("y_dtype"), py::arg("record"),
           py::arg("topk_weights"), py::arg("w_dtype"), py::arg("pe_mask"))
      .def("close", &MoeRuntime::close)
      .def("abandon", &MoeRuntime::abandon);
}

}  // namespace shmoe::python
