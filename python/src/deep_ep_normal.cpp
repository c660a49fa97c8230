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
#include <string>
#include <vector>

#include "bindings.hpp"
#include "moe_buffer.hpp"

namespace shmoe::python {
namespace {

// Header ints of a dispatch, before its tokens per expert: top-k width and num_worst_tokens.
constexpr std::size_t kHeader = 2;

template <typename T>
py::array_t<T> array(std::initializer_list<py::ssize_t> shape) {
  return py::array_t<T>(std::vector<py::ssize_t>(shape));
}

// The checks that need every rank's header: the same data on every rank, so the same verdict.
void check_ranks(const std::string& call, const std::vector<std::int32_t>& ints, std::size_t width,
                 const std::vector<std::int32_t>& counts, int n, int me) {
  const std::int32_t k = ints[static_cast<std::size_t>(me) * width];
  for (int j = 0; j < n; ++j) {
    const std::int32_t kj = ints[static_cast<std::size_t>(j) * width];
    if (kj != k) {
      throw Refused(call + ": ranks disagree on num_topk: rank " + std::to_string(j) +
                    " passed top-k indices of " + std::to_string(kj) + " columns, rank " +
                    std::to_string(me) + " of " + std::to_string(k));
    }
  }
  for (int j = 0; j < n; ++j) {
    std::int64_t rows = 0;
    for (int i = 0; i < n; ++i) rows += counts[static_cast<std::size_t>(i) * n + j];
    const std::int32_t worst = ints[static_cast<std::size_t>(j) * width + 1];
    if (worst > 0 && worst < rows) {
      throw Refused(call + ": rank " + std::to_string(j) +
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
  if (xs.size != tokens * row || in_rank.size != tokens * P || idx.size != tokens * K * 8 ||
      w.size != tokens * K * 4 || (K > 0 && idx.data == nullptr) || 2 * K > W ||
      b.token_side_bytes() != W * 4 || b.header_ints() != kHeader + E || L * P != E) {
    throw Refused(call + ": the arrays do not match the operator's shape");
  }
  const auto* ids = idx.as<std::int64_t>();
  const auto* weights = w.as<std::int32_t>();  // the bits travel; the receiver reads floats
  const auto* routed = in_rank.as<bool>();

  auto routes = array<std::int32_t>({static_cast<py::ssize_t>(tokens), n});
  std::int32_t* route = routes.mutable_data();
  for (std::size_t i = 0; i < tokens * P; ++i)
    route[i] = routed[i] ? static_cast<std::int32_t>(i % P) : -1;
  std::vector<std::int32_t> side(tokens * W, 0);
  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t k = 0; k < K; ++k) {
      side[t * W + k] = static_cast<std::int32_t>(ids[t * K + k]);
      side[t * W + W / 2 + k] = weights[t * K + k];
    }
  }
  std::vector<std::int32_t> ints(kHeader + E);
  ints[0] = static_cast<std::int32_t>(K);
  ints[1] = num_worst_tokens;
  std::memcpy(ints.data() + kHeader, experts_in.data, E * 4);

  const std::size_t cap = b.capacity();
  auto assist = array<std::int32_t>({static_cast<py::ssize_t>(cap), 3});
  auto ep_recv = array<std::int32_t>({n});
  py::object block = py::cast(b.take_rows());
  std::byte* received = static_cast<std::byte*>(block.cast<HostBlock&>().info().ptr);
  std::vector<std::int32_t> side_out(cap * W), all_ints(P * ints.size()), counts(P * P);
  std::int32_t nums = 0;
  const int rows = released([&] {
    return op.dispatch({xs.data, route, nullptr, static_cast<int>(tokens), side.data(), ints.data(),
                        SHMOE_CALL_PROCEED},
                       {received, assist.mutable_data(), ep_recv.mutable_data(), &nums, nullptr,
                        side_out.data(), all_ints.data(), counts.data()});
  });
  if (rows == MoeBuffer::kRetry) return py::none();
  check_ranks(call, all_ints, ints.size(), counts, n, me);
  const std::size_t R = static_cast<std::size_t>(rows);

  const py::dtype bf16_bits = py::dtype::of<std::int16_t>();
  py::array recv_x(
      bf16_bits,
      std::vector<py::ssize_t>{static_cast<py::ssize_t>(R), static_cast<py::ssize_t>(hidden)},
      received, block);
  py::object recv_idx = py::none(), recv_w = py::none();
  if (K > 0) {
    auto local = array<std::int64_t>({static_cast<py::ssize_t>(R), static_cast<py::ssize_t>(K)});
    auto kept = array<float>({static_cast<py::ssize_t>(R), static_cast<py::ssize_t>(K)});
    std::int64_t* li = local.mutable_data();
    float* kw = kept.mutable_data();
    const std::int64_t first = static_cast<std::int64_t>(me) * static_cast<std::int64_t>(L);
    for (std::size_t r = 0; r < R; ++r) {
      for (std::size_t k = 0; k < K; ++k) {
        const std::int64_t e = side_out[r * W + k] - first;
        const bool mine = e >= 0 && e < static_cast<std::int64_t>(L);
        li[r * K + k] = mine ? e : -1;
        float v;
        std::memcpy(&v, &side_out[r * W + W / 2 + k], 4);
        kw[r * K + k] = mine ? v : 0.0f;
      }
    }
    recv_idx = local;
    recv_w = kept;
  }
  auto prefix = array<std::int32_t>({n, n});
  auto channel = array<std::int32_t>({n, 1}), recv_channel = array<std::int32_t>({n, 1});
  std::int32_t* pm = prefix.mutable_data();
  for (std::size_t i = 0; i < P; ++i) {
    for (std::size_t j = 0; j < P; ++j)
      pm[i * P + j] = counts[i * P + j] + (i > 0 ? pm[(i - 1) * P + j] : 0);
  }
  for (std::size_t j = 0; j < P; ++j) {
    channel.mutable_data()[j] = counts[static_cast<std::size_t>(me) * P + j];
    recv_channel.mutable_data()[j] = counts[j * P + static_cast<std::size_t>(me)];
  }
  auto src_idx = array<std::int32_t>({static_cast<py::ssize_t>(R)});
  for (std::size_t r = 0; r < R; ++r) src_idx.mutable_data()[r] = assist.data()[3 * r + 1];
  auto send_head = array<std::int32_t>({static_cast<py::ssize_t>(tokens), n});
  std::vector<std::int32_t> sent(P, 0);
  std::int32_t* head = send_head.mutable_data();
  for (std::size_t i = 0; i < tokens * P; ++i) head[i] = routed[i] ? sent[i % P]++ : -1;
  auto per_local = array<std::int64_t>({static_cast<py::ssize_t>(L)});
  for (std::size_t l = 0; l < L; ++l) {
    std::int64_t sum = 0;
    for (std::size_t i = 0; i < P; ++i)
      sum += all_ints[i * ints.size() + kHeader + static_cast<std::size_t>(me) * L + l];
    per_local.mutable_data()[l] = sum;
  }
  return py::make_tuple(rows, recv_x, routes, assist, ep_recv, recv_idx, recv_w, prefix, channel,
                        recv_channel, src_idx, send_head, per_local,
                        all_ints[static_cast<std::size_t>(me) * ints.size() + 1]);
}

}  // namespace

void bind_deep_ep(py::module_& m) {
  m.def("deep_ep_normal_dispatch", &normal_dispatch, py::arg("buffer"), py::arg("call"),
        py::arg("rank"), py::arg("x"), py::arg("is_token_in_rank"), py::arg("topk_idx"),
        py::arg("topk_weights"), py::arg("num_topk"), py::arg("num_tokens_per_expert"),
        py::arg("num_worst_tokens"), py::arg("side_width"));
}

}  // namespace shmoe::python
