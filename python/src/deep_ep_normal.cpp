// deep_ep's normal-mode dispatch as one call (deep_ep/normal.py calls it): DeepEP's intranode
// layout around one shmoe dispatch, as DeepEP's Python Buffer calls one runtime method per
// operation. The operator has one expert per rank; each token's top-k indices and weights travel
// with its rows (token side data), and each rank's top-k width, num_worst_tokens and tokens per
// expert reach every rank in the call's header, so nothing else is exchanged. What is built here
// from the operator's outputs is arithmetic on small arrays, which in NumPy cost more than the
// dispatch itself at decode sizes.
#include <pybind11/numpy.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "moe_buffer.hpp"

namespace shmoe::python {
namespace {

// Header ints of a dispatch, before its tokens per expert: top-k width and num_worst_tokens.
constexpr std::size_t kHeader = 2;

// Output arrays carved from one host block of the buffer's pool, each keeping the block alive:
// the same few hundred KiB every call, with no page faults. Reserve every part, then open().
class Carved {
 public:
  // The next part, of `elems` elements of T: its offset, for ptr() and array().
  template <typename T>
  std::size_t reserve(std::size_t elems) {
    const std::size_t at = at_;
    at_ += round64(elems * sizeof(T));
    return at;
  }
  template <typename T>
  T* ptr(std::size_t at) const {
    return reinterpret_cast<T*>(base_ + at);
  }
  std::size_t bytes() const { return at_; }
  // The block, once every part is reserved.
  void open(std::unique_ptr<HostBlock> block) {
    base_ = static_cast<std::byte*>(block->info().ptr);
    block_ = py::cast(std::move(block));
  }
  // The part at `at` as an array of `shape` (at most the elements reserved).
  template <typename T>
  py::array_t<T> array(std::size_t at, std::vector<py::ssize_t> shape) const {
    return py::array_t<T>(std::move(shape), ptr<T>(at), block_);
  }

 private:
  static std::size_t round64(std::size_t b) { return (b + 63) / 64 * 64; }
  std::byte* base_ = nullptr;
  py::object block_;
  std::size_t at_ = 0;
};

// The checks that need every rank's header: the same data on every rank, so the same verdict.
void check_ranks(const std::string& call, const std::vector<std::int32_t>& ints, std::size_t width,
                 const std::vector<std::int32_t>& counts, int n, int me) {
  const std::int32_t k = ints[static_cast<std::size_t>(me) * width];
  for (int j = 0; j < n; ++j) {
    const std::int32_t kj = ints[static_cast<std::size_t>(j) * width];
    if (kj != k) {
      throw Error(call + ": ranks disagree on num_topk: rank " + std::to_string(j) +
                  " passed top-k indices of " + std::to_string(kj) + " columns, rank " +
                  std::to_string(me) + " of " + std::to_string(k));
    }
  }
  for (int j = 0; j < n; ++j) {
    std::int64_t rows = 0;
    for (int i = 0; i < n; ++i) rows += counts[static_cast<std::size_t>(i) * n + j];
    const std::int32_t worst = ints[static_cast<std::size_t>(j) * width + 1];
    if (worst > 0 && worst < rows) {
      throw Error(call + ": rank " + std::to_string(j) +
                  " passed num_worst_tokens=" + std::to_string(worst) + ", fewer than the " +
                  std::to_string(rows) + " tokens it receives");
    }
  }
}

// x: bfloat16 bits [tokens, hidden]; is_token_in_rank: bool [tokens, ranks]; topk_idx: int64
// [tokens, K] and topk_weights: float32 [tokens, K], or None and None (K = num_topk, 0 for
// None); num_tokens_per_expert:
// int32 [experts]; side_width: int32 per token of the operator's token side data (indices, then
// weight bits, side_width / 2 each). Returns None when some rank asked for a retry, else (rows,
// recv_x [rows, hidden] over a host block of the operator's pool, routes [tokens, ranks],
// assist_info, ep_recv_count, recv_topk_idx [rows, K] int64 (local, or -1) or None,
// recv_topk_weights [rows, K] or None, rank_prefix_matrix [ranks, ranks],
// channel_prefix_matrix [ranks, 1], recv_channel_prefix_matrix [ranks, 1], recv_src_idx [rows],
// send_head [tokens, ranks], tokens per local expert [local experts] int64, num_worst_tokens).
py::object normal_dispatch(Buffer& b, const std::string& call, int me, const py::buffer& x,
                           const py::buffer& is_token_in_rank, const py::object& topk_idx,
                           const py::object& topk_weights, int num_topk,
                           const py::buffer& per_expert, int num_worst_tokens, int side_width) {
  MoeBuffer& op = b.get();
  const int n = shmem_n_pes();
  const Bytes xs = bytes_of(x, "x"), in_rank = bytes_of(is_token_in_rank, "is_token_in_rank");
  const Bytes idx = bytes_or_null(topk_idx, "topk_idx"),
              w = bytes_or_null(topk_weights, "topk_weights");
  const Bytes experts_in = bytes_of(per_expert, "num_tokens_per_expert");
  const std::size_t hidden = static_cast<std::size_t>(b.hidden()), row = b.row_bytes();
  const std::size_t tokens = xs.size / row, P = static_cast<std::size_t>(n);
  const std::size_t E = experts_in.size / 4, L = E / P, W = static_cast<std::size_t>(side_width);
  const std::size_t K = num_topk > 0 ? static_cast<std::size_t>(num_topk) : 0;
  const std::size_t cap = b.capacity(), most = b.max_tokens_per_pe(), Kp = W / 2;
  if (tokens > most || xs.size != tokens * row || in_rank.size != tokens * P ||
      idx.size != tokens * K * 8 || w.size != tokens * K * 4 || (K > 0 && idx.data == nullptr) ||
      2 * K > W || b.token_side_bytes() != W * 4 || b.header_ints() != kHeader + E || L * P != E) {
    throw Error(call + ": the arrays do not match the operator's shape");
  }
  const auto* ids = idx.as<std::int64_t>();
  const auto* weights = w.as<std::int32_t>();  // the bits travel; the receiver reads floats
  const auto* routed = in_rank.as<bool>();

  // Outputs, in one block: assist_info, routes, recv_topk_idx, recv_topk_weights, recv_src_idx,
  // send_head, ep_recv_count, the prefix matrices, tokens per local expert.
  Carved out;
  const auto T_ = static_cast<py::ssize_t>(tokens), n_ = static_cast<py::ssize_t>(n);
  const std::size_t assist_at = out.reserve<std::int32_t>(cap * 3);
  const std::size_t routes_at = out.reserve<std::int32_t>(most * P);
  const std::size_t idx_at = out.reserve<std::int64_t>(cap * Kp);
  const std::size_t w_at = out.reserve<float>(cap * Kp);
  const std::size_t src_at = out.reserve<std::int32_t>(cap);
  const std::size_t head_at = out.reserve<std::int32_t>(most * P);
  const std::size_t ep_recv_at = out.reserve<std::int32_t>(P);
  const std::size_t prefix_at = out.reserve<std::int32_t>(P * P);
  const std::size_t channel_at = out.reserve<std::int32_t>(P);
  const std::size_t recv_channel_at = out.reserve<std::int32_t>(P);
  const std::size_t local_at = out.reserve<std::int64_t>(L);
  out.open(b.take_block(out.bytes()));
  std::int32_t* route = out.ptr<std::int32_t>(routes_at);
  for (std::size_t i = 0; i < tokens * P; ++i)
    route[i] = routed[i] ? static_cast<std::int32_t>(i % P) : -1;
  // Scratch: each token's side data (its top-k indices, then its weights' bits; the columns
  // past K are not read), the received side data, every rank's header ints and counts.
  std::int32_t* side = b.scratch(0, most * W);
  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t k = 0; k < K; ++k) {
      side[t * W + k] = static_cast<std::int32_t>(ids[t * K + k]);
      side[t * W + Kp + k] = weights[t * K + k];
    }
  }
  std::int32_t* ints = b.scratch(1, kHeader + E);
  ints[0] = static_cast<std::int32_t>(K);
  ints[1] = num_worst_tokens;
  std::memcpy(ints + kHeader, experts_in.data, E * 4);
  std::int32_t* side_out = b.scratch(2, cap * W);
  const std::size_t width = kHeader + E;
  std::vector<std::int32_t> all_ints(P * width), counts(P * P);

  py::object rows_block = py::cast(b.take_rows());
  std::byte* received = static_cast<std::byte*>(rows_block.cast<HostBlock&>().info().ptr);
  std::int32_t* assist = out.ptr<std::int32_t>(assist_at);
  std::int32_t nums = 0;
  DispatchArgs args;  // no pe_mask: normal mode is never in shrink mode
  args.x = xs.data;
  args.topk_idx = route;
  args.num_tokens = static_cast<int>(tokens);
  args.token_side = side;
  args.header_ints = ints;
  DispatchOutputs outs;
  outs.recv_x = received;
  outs.recv_src_info = assist;
  outs.recv_layout_prefix = out.ptr<std::int32_t>(ep_recv_at);
  outs.num_recv_tokens_per_expert = &nums;
  outs.recv_token_side = side_out;
  outs.all_header_ints = all_ints.data();
  outs.all_counts = counts.data();
  const int rows = released([&] { return op.dispatch(args, outs); });
  if (rows == MoeBuffer::kRetry) return py::none();
  check_ranks(call, all_ints, width, counts, n, me);
  const std::size_t R = static_cast<std::size_t>(rows);
  const auto R_ = static_cast<py::ssize_t>(R);

  py::array recv_x(py::dtype::of<std::int16_t>(),
                   std::vector<py::ssize_t>{R_, static_cast<py::ssize_t>(hidden)}, received,
                   rows_block);
  py::object recv_idx = py::none(), recv_w = py::none();
  if (K > 0) {
    auto* li = out.ptr<std::int64_t>(idx_at);
    auto* kw = out.ptr<float>(w_at);
    const std::int64_t first = static_cast<std::int64_t>(me) * static_cast<std::int64_t>(L);
    for (std::size_t r = 0; r < R; ++r) {
      for (std::size_t k = 0; k < K; ++k) {
        const std::int64_t e = side_out[r * W + k] - first;
        const bool mine = e >= 0 && e < static_cast<std::int64_t>(L);
        li[r * K + k] = mine ? e : -1;
        float v;
        std::memcpy(&v, &side_out[r * W + Kp + k], 4);
        kw[r * K + k] = mine ? v : 0.0f;
      }
    }
    recv_idx = out.array<std::int64_t>(idx_at, {R_, static_cast<py::ssize_t>(K)});
    recv_w = out.array<float>(w_at, {R_, static_cast<py::ssize_t>(K)});
  }
  std::int32_t* pm = out.ptr<std::int32_t>(prefix_at);
  for (std::size_t i = 0; i < P; ++i) {
    for (std::size_t j = 0; j < P; ++j)
      pm[i * P + j] = counts[i * P + j] + (i > 0 ? pm[(i - 1) * P + j] : 0);
  }
  std::int32_t* ch = out.ptr<std::int32_t>(channel_at);
  std::int32_t* rch = out.ptr<std::int32_t>(recv_channel_at);
  for (std::size_t j = 0; j < P; ++j) {
    ch[j] = counts[static_cast<std::size_t>(me) * P + j];
    rch[j] = counts[j * P + static_cast<std::size_t>(me)];
  }
  std::int32_t* src = out.ptr<std::int32_t>(src_at);
  for (std::size_t r = 0; r < R; ++r) src[r] = assist[3 * r + 1];
  std::vector<std::int32_t> sent(P, 0);
  std::int32_t* head = out.ptr<std::int32_t>(head_at);
  for (std::size_t i = 0; i < tokens * P; ++i) head[i] = routed[i] ? sent[i % P]++ : -1;
  auto* per_local = out.ptr<std::int64_t>(local_at);
  for (std::size_t l = 0; l < L; ++l) {
    std::int64_t sum = 0;
    for (std::size_t i = 0; i < P; ++i)
      sum += all_ints[i * width + kHeader + static_cast<std::size_t>(me) * L + l];
    per_local[l] = sum;
  }
  return py::make_tuple(
      rows, recv_x, out.array<std::int32_t>(routes_at, {T_, n_}),
      out.array<std::int32_t>(assist_at, {static_cast<py::ssize_t>(cap), 3}),
      out.array<std::int32_t>(ep_recv_at, {n_}), recv_idx, recv_w,
      out.array<std::int32_t>(prefix_at, {n_, n_}), out.array<std::int32_t>(channel_at, {n_, 1}),
      out.array<std::int32_t>(recv_channel_at, {n_, 1}), out.array<std::int32_t>(src_at, {R_}),
      out.array<std::int32_t>(head_at, {T_, n_}),
      out.array<std::int64_t>(local_at, {static_cast<py::ssize_t>(L)}),
      all_ints[static_cast<std::size_t>(me) * width + 1]);
}

}  // namespace

void bind_deep_ep(py::module_& m) {
  m.def("deep_ep_normal_dispatch", &normal_dispatch, py::arg("buffer"), py::arg("call"),
        py::arg("rank"), py::arg("x"), py::arg("is_token_in_rank"), py::arg("topk_idx"),
        py::arg("topk_weights"), py::arg("num_topk"), py::arg("num_tokens_per_expert"),
        py::arg("num_worst_tokens"), py::arg("side_width"));
}

}  // namespace shmoe::python
