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

// The sizes of one call, from its arrays and the operator: P ranks, E experts, L per rank, K
// top-k columns, W int32 of side data per token (Kp = W / 2 for the indices, then the weights),
// cap rows received at most, most tokens sent at most.
struct Dims {
  std::size_t hidden, row, tokens, P, E, L, W, K, cap, most, Kp;
};

// One normal-mode dispatch (normal_dispatch), a method per phase: check the arrays against the
// operator, lay out the outputs, pack the routes, side data and header, dispatch, then build
// DeepEP's outputs from the operator's.
class NormalDispatch {
 public:
  NormalDispatch(Buffer& b, const std::string& call, int me, const py::buffer& x,
                 const py::buffer& is_token_in_rank, const py::object& topk_idx,
                 const py::object& topk_weights, int num_topk, const py::buffer& per_expert,
                 int num_worst_tokens, int side_width)
      : b_(b),
        op_(b.get()),
        call_(call),
        me_(me),
        n_(shmem_n_pes()),
        num_worst_tokens_(num_worst_tokens),
        xs_(bytes_of(x, "x")),
        in_rank_(bytes_of(is_token_in_rank, "is_token_in_rank")),
        idx_(bytes_or_null(topk_idx, "topk_idx")),
        w_(bytes_or_null(topk_weights, "topk_weights")),
        experts_in_(bytes_of(per_expert, "num_tokens_per_expert")),
        d_(dims(num_topk, side_width)) {
    check_shapes();
  }

  py::object run() {
    reserve_outputs();
    pack_inputs();
    const int rows = dispatch();
    if (rows == MoeBuffer::kRetry) return py::none();
    check_ranks(call_, all_ints_, width_, counts_, n_, me_);
    R_ = static_cast<std::size_t>(rows);
    local_topk();
    prefix_matrices();
    indices();
    return result(rows);
  }

 private:
  Dims dims(int num_topk, int side_width) const {
    Dims d{};
    d.hidden = static_cast<std::size_t>(b_.hidden());
    d.row = b_.row_bytes();
    d.tokens = xs_.size / d.row;
    d.P = static_cast<std::size_t>(n_);
    d.E = experts_in_.size / 4;
    d.L = d.E / d.P;
    d.W = static_cast<std::size_t>(side_width);
    d.K = num_topk > 0 ? static_cast<std::size_t>(num_topk) : 0;
    d.cap = b_.capacity();
    d.most = b_.max_tokens_per_pe();
    d.Kp = d.W / 2;
    return d;
  }

  void check_shapes() const {
    const Dims& d = d_;
    if (d.tokens > d.most || xs_.size != d.tokens * d.row || in_rank_.size != d.tokens * d.P ||
        idx_.size != d.tokens * d.K * 8 || w_.size != d.tokens * d.K * 4 ||
        (d.K > 0 && idx_.data == nullptr) || 2 * d.K > d.W || b_.token_side_bytes() != d.W * 4 ||
        b_.header_ints() != kHeader + d.E || d.L * d.P != d.E) {
      throw Error(call_ + ": the arrays do not match the operator's shape");
    }
  }

  // Outputs, in one block: assist_info, routes, recv_topk_idx, recv_topk_weights, recv_src_idx,
  // send_head, ep_recv_count, the prefix matrices, tokens per local expert.
  void reserve_outputs() {
    const Dims& d = d_;
    assist_at_ = out_.reserve<std::int32_t>(d.cap * 3);
    routes_at_ = out_.reserve<std::int32_t>(d.most * d.P);
    idx_at_ = out_.reserve<std::int64_t>(d.cap * d.Kp);
    w_at_ = out_.reserve<float>(d.cap * d.Kp);
    src_at_ = out_.reserve<std::int32_t>(d.cap);
    head_at_ = out_.reserve<std::int32_t>(d.most * d.P);
    ep_recv_at_ = out_.reserve<std::int32_t>(d.P);
    prefix_at_ = out_.reserve<std::int32_t>(d.P * d.P);
    channel_at_ = out_.reserve<std::int32_t>(d.P);
    recv_channel_at_ = out_.reserve<std::int32_t>(d.P);
    local_at_ = out_.reserve<std::int64_t>(d.L);
    out_.open(b_.take_block(out_.bytes()));
  }

  void pack_inputs() {
    const Dims& d = d_;
    const auto* ids = idx_.as<std::int64_t>();
    const auto* weights = w_.as<std::int32_t>();  // the bits travel; the receiver reads floats
    const auto* routed = in_rank_.as<bool>();
    std::int32_t* route = out_.ptr<std::int32_t>(routes_at_);
    for (std::size_t i = 0; i < d.tokens * d.P; ++i)
      route[i] = routed[i] ? static_cast<std::int32_t>(i % d.P) : -1;
    // Scratch: each token's side data (its top-k indices, then its weights' bits; the columns
    // past K are not read), the received side data, every rank's header ints and counts.
    side_ = b_.scratch(0, d.most * d.W);
    for (std::size_t t = 0; t < d.tokens; ++t) {
      for (std::size_t k = 0; k < d.K; ++k) {
        side_[t * d.W + k] = static_cast<std::int32_t>(ids[t * d.K + k]);
        side_[t * d.W + d.Kp + k] = weights[t * d.K + k];
      }
    }
    ints_ = b_.scratch(1, kHeader + d.E);
    ints_[0] = static_cast<std::int32_t>(d.K);
    ints_[1] = num_worst_tokens_;
    std::memcpy(ints_ + kHeader, experts_in_.data, d.E * 4);
    side_out_ = b_.scratch(2, d.cap * d.W);
    width_ = kHeader + d.E;
    all_ints_.resize(d.P * width_);
    counts_.resize(d.P * d.P);
  }

  // The operator's dispatch: the rows received, or MoeBuffer::kRetry.
  int dispatch() {
    rows_block_ = py::cast(b_.take_rows());
    received_ = static_cast<std::byte*>(rows_block_.cast<HostBlock&>().info().ptr);
    DispatchArgs args;  // no pe_mask: normal mode is never in shrink mode
    args.x = xs_.data;
    args.topk_idx = out_.ptr<std::int32_t>(routes_at_);
    args.num_tokens = static_cast<int>(d_.tokens);
    args.token_side = side_;
    args.header_ints = ints_;
    DispatchOutputs outs;
    outs.recv_x = received_;
    outs.recv_src_info = out_.ptr<std::int32_t>(assist_at_);
    outs.recv_layout_prefix = out_.ptr<std::int32_t>(ep_recv_at_);
    outs.num_recv_tokens_per_expert = &nums_;
    outs.recv_token_side = side_out_;
    outs.all_header_ints = all_ints_.data();
    outs.all_counts = counts_.data();
    return released([&] { return op_.dispatch(args, outs); });
  }

  // recv_topk_idx (local expert, or -1) and recv_topk_weights (0 where not local), where K > 0.
  void local_topk() {
    const Dims& d = d_;
    if (d.K == 0) return;
    auto* li = out_.ptr<std::int64_t>(idx_at_);
    auto* kw = out_.ptr<float>(w_at_);
    const std::int64_t first = static_cast<std::int64_t>(me_) * static_cast<std::int64_t>(d.L);
    for (std::size_t r = 0; r < R_; ++r) {
      for (std::size_t k = 0; k < d.K; ++k) {
        const std::int64_t e = side_out_[r * d.W + k] - first;
        const bool mine = e >= 0 && e < static_cast<std::int64_t>(d.L);
        li[r * d.K + k] = mine ? e : -1;
        float v;
        std::memcpy(&v, &side_out_[r * d.W + d.Kp + k], 4);
        kw[r * d.K + k] = mine ? v : 0.0f;
      }
    }
  }

  // rank_prefix_matrix, channel_prefix_matrix and recv_channel_prefix_matrix.
  void prefix_matrices() {
    const std::size_t P = d_.P;
    std::int32_t* pm = out_.ptr<std::int32_t>(prefix_at_);
    for (std::size_t i = 0; i < P; ++i) {
      for (std::size_t j = 0; j < P; ++j)
        pm[i * P + j] = counts_[i * P + j] + (i > 0 ? pm[(i - 1) * P + j] : 0);
    }
    std::int32_t* ch = out_.ptr<std::int32_t>(channel_at_);
    std::int32_t* rch = out_.ptr<std::int32_t>(recv_channel_at_);
    for (std::size_t j = 0; j < P; ++j) {
      ch[j] = counts_[static_cast<std::size_t>(me_) * P + j];
      rch[j] = counts_[j * P + static_cast<std::size_t>(me_)];
    }
  }

  // recv_src_idx, send_head and the tokens per local expert.
  void indices() {
    const Dims& d = d_;
    const auto* assist = out_.ptr<std::int32_t>(assist_at_);
    std::int32_t* src = out_.ptr<std::int32_t>(src_at_);
    for (std::size_t r = 0; r < R_; ++r) src[r] = assist[3 * r + 1];
    const auto* routed = in_rank_.as<bool>();
    std::vector<std::int32_t> sent(d.P, 0);
    std::int32_t* head = out_.ptr<std::int32_t>(head_at_);
    for (std::size_t i = 0; i < d.tokens * d.P; ++i) head[i] = routed[i] ? sent[i % d.P]++ : -1;
    auto* per_local = out_.ptr<std::int64_t>(local_at_);
    for (std::size_t l = 0; l < d.L; ++l) {
      std::int64_t sum = 0;
      for (std::size_t i = 0; i < d.P; ++i)
        sum += all_ints_[i * width_ + kHeader + static_cast<std::size_t>(me_) * d.L + l];
      per_local[l] = sum;
    }
  }

  py::object result(int rows) const {
    const auto T = static_cast<py::ssize_t>(d_.tokens), N = static_cast<py::ssize_t>(d_.P);
    const auto R = static_cast<py::ssize_t>(R_);
    py::array recv_x(py::dtype::of<std::int16_t>(),
                     std::vector<py::ssize_t>{R, static_cast<py::ssize_t>(d_.hidden)}, received_,
                     rows_block_);
    py::object recv_idx = py::none(), recv_w = py::none();
    if (d_.K > 0) {
      recv_idx = out_.array<std::int64_t>(idx_at_, {R, static_cast<py::ssize_t>(d_.K)});
      recv_w = out_.array<float>(w_at_, {R, static_cast<py::ssize_t>(d_.K)});
    }
    return py::make_tuple(
        rows, recv_x, out_.array<std::int32_t>(routes_at_, {T, N}),
        out_.array<std::int32_t>(assist_at_, {static_cast<py::ssize_t>(d_.cap), 3}),
        out_.array<std::int32_t>(ep_recv_at_, {N}), recv_idx, recv_w,
        out_.array<std::int32_t>(prefix_at_, {N, N}), out_.array<std::int32_t>(channel_at_, {N, 1}),
        out_.array<std::int32_t>(recv_channel_at_, {N, 1}), out_.array<std::int32_t>(src_at_, {R}),
        out_.array<std::int32_t>(head_at_, {T, N}),
        out_.array<std::int64_t>(local_at_, {static_cast<py::ssize_t>(d_.L)}),
        all_ints_[static_cast<std::size_t>(me_) * width_ + 1]);
  }

  Buffer& b_;
  MoeBuffer& op_;
  const std::string& call_;
  const int me_;
  const int n_;
  const int num_worst_tokens_;
  const Bytes xs_, in_rank_, idx_, w_, experts_in_;
  const Dims d_;
  Carved out_;
  std::size_t assist_at_ = 0, routes_at_ = 0, idx_at_ = 0, w_at_ = 0, src_at_ = 0, head_at_ = 0,
              ep_recv_at_ = 0, prefix_at_ = 0, channel_at_ = 0, recv_channel_at_ = 0, local_at_ = 0;
  std::int32_t* side_ = nullptr;      // each token's side data
  std::int32_t* ints_ = nullptr;      // this rank's header ints
  std::int32_t* side_out_ = nullptr;  // the received rows' side data
  std::size_t width_ = 0;             // header ints per rank
  std::vector<std::int32_t> all_ints_, counts_;
  py::object rows_block_;
  std::byte* received_ = nullptr;
  std::int32_t nums_ = 0;
  std::size_t R_ = 0;  // rows received
};

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
  NormalDispatch dispatch(b, call, me, x, is_token_in_rank, topk_idx, topk_weights, num_topk,
                          per_expert, num_worst_tokens, side_width);
  return dispatch.run();
}

}  // namespace

void bind_deep_ep(py::module_& m) {
  m.def("deep_ep_normal_dispatch", &normal_dispatch, py::arg("buffer"), py::arg("call"),
        py::arg("rank"), py::arg("x"), py::arg("is_token_in_rank"), py::arg("topk_idx"),
        py::arg("topk_weights"), py::arg("num_topk"), py::arg("num_tokens_per_expert"),
        py::arg("num_worst_tokens"), py::arg("side_width"));
}

}  // namespace shmoe::python
