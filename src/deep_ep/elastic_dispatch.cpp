// ElasticBuffer::dispatch as a call object: each phase a method, the barriers in operator().
// Source rank i writes its k-th token for rank j into slot i * num_max_tokens_per_rank + k of
// j's window (the token's index, its top-k indices and weights, then its row), and its token
// count into j's counts[i]; j reads the slots in source order, so rows arrive ordered by source
// rank, then token, whatever the timing. Where receive blocks are (docs/deep_ep.md, "Results with
// no copy"), x without scales goes apart: a header exchange first (ElasticLanding) fixes each
// row's place in the receiver's block, the slot carries the routing alone, and recv_x is the
// block; a receiver without a free block, or whose rows do not fit one, takes the copy.
#include <fmt/format.h>
#include <shmem.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "deep_ep/checks.hpp"
#include "deep_ep/elastic_buffer.hpp"
#include "deep_ep/elastic_landing.hpp"
#include "moe/moe.hpp"
#include "shmoe/runtime.hpp"

namespace shmoe::deep_ep {
namespace {

constexpr const char* kCall = "ElasticBuffer.dispatch";

std::int64_t align_up(std::int64_t v, std::int64_t a) {
  return (v + a - 1) / a * a;
}

std::int64_t row_bytes(const shmoe_tensor_t& t) {
  return t.data == nullptr ? 0 : t.shape[1] * static_cast<std::int64_t>(dtype_bytes(t.dtype));
}

class DispatchCall {
 public:
  DispatchCall(ElasticBuffer& b, const shmoe_elastic_dispatch_args_t& a)
      : b_(b), a_(a), checks_(kCall), result_(std::make_unique<shmoe_ep_result>()) {
    result_->use(b.memory());
  }

  shmoe_ep_result* operator()() {
    check();
    agree(SHMEM_TEAM_WORLD, kCall, checks_.why(),
          {{"num_experts", num_experts_},
           {"num_max_tokens_per_rank", max_tokens_},
           {"x's row bytes", x_row_},
           {"sf's row bytes", sf_row_},
           {"num_topk", topk_},
           {"whether topk_weights is given", with_weights_},
           {"whether a handle is given (a cached dispatch)", handle_ != nullptr},
           // Senders place rows by the receivers' layout: it must be the same everywhere.
           {"4 x expert_alignment + 2 x do_expand + do_cpu_sync",
            4 * shape_.align + 2 * shape_.expand + shape_.cpu_sync}});
    b_.require_fits(kCall, static_cast<std::uint64_t>(b_.num_ranks() * max_tokens_ * slot_),
                    "num_ranks x num_max_tokens_per_rank x each token's row, indices and weights");
    // x with scales is copied: DeepEP returns them apart while a row carries both.
    if (sf_row_ == 0 && b_.blocks().count() > 0) landing_.emplace(b_, shape_, topk());
    send();
    shmem_barrier_all();
    receive();
    write_rows();
    if (handle_ == nullptr) {
      write_handle();
    } else {
      result_->cached = true;
    }
    return result_.release();
  }

 private:
  void check();
  void check_routing();
  void check_cached();
  void send();
  void write_slot(std::byte* s, int j, std::int64_t t) const;
  void receive();
  void write_rows();
  shmoe_tensor_t& recv_x(std::int64_t rows, std::int64_t cols, bool zero);
  void zero_gaps(std::byte* rows, std::int64_t total) const;
  void write_handle();

  const std::int32_t* topk() const { return routing_->topk_idx.data(); }

  ElasticBuffer& b_;
  const shmoe_elastic_dispatch_args_t& a_;
  Checks checks_;
  std::unique_ptr<shmoe_ep_result> result_;
  const Result* handle_ = nullptr;
  std::shared_ptr<Routing> routing_;
  std::int64_t num_experts_ = 0, max_tokens_ = 0, x_row_ = 0, sf_row_ = 0, topk_ = 0;
  std::int64_t slot_ = 0, tokens_ = 0, local_ = 0;
  bool with_weights_ = false;
  std::vector<std::int32_t> dst_slot_;  // [tokens][topk]: the slot at the expert's rank, or -1
  // Rows for ranks whose window is not mapped (another host), put from here; not zeroed.
  std::vector<std::unique_ptr<std::byte[]>> staged_;
  std::vector<std::int64_t> per_expert_;  // received tokens of each local expert
  ElasticLanding::Shape shape_;
  std::optional<ElasticLanding> landing_;  // where recv_x's rows go into blocks
  bool direct_ = false;                    // recv_x is this rank's block
};

void DispatchCall::check() {
  if (a_.refusal != nullptr) checks_.refuse(a_.refusal);
  handle_ = a_.handle;
  if (handle_ != nullptr) {
    check_cached();
  } else {
    check_routing();
  }
  const shmoe_tensor_t& x = a_.x;
  if (checks_.tensor(x, "x", {x.dtype}, {{}, {}})) {
    tokens_ = x.shape[0];
    x_row_ = row_bytes(x);
  }
  if (checks_.given(a_.sf) && checks_.tensor(a_.sf, "sf", {a_.sf.dtype}, {{tokens_}, {}})) {
    sf_row_ = row_bytes(a_.sf);
  }
  with_weights_ = checks_.given(a_.topk_weights);
  if (with_weights_) {
    checks_.tensor(a_.topk_weights, "topk_weights", {SHMOE_DTYPE_FLOAT32}, {{tokens_}, {topk_}});
  }
  const int n = b_.num_ranks();
  if (!checks_.any() && num_experts_ % n != 0) {
    checks_.refuse(
        fmt::format("num_experts={} is not a multiple of the {} ranks", num_experts_, n));
  }
  local_ = checks_.any() ? 0 : num_experts_ / n;
  if (checks_.given(a_.cumulative_local_expert_recv_stats)) {
    checks_.tensor(a_.cumulative_local_expert_recv_stats, "cumulative_local_expert_recv_stats",
                   {SHMOE_DTYPE_INT32}, {{local_}});
  }
  checks_.range("expert_alignment", a_.expert_alignment == 0 ? 1 : a_.expert_alignment, 1);
  const int default_tokens = routing_ != nullptr && handle_ != nullptr
                                 ? routing_->num_max_tokens_per_rank
                                 : b_.config().num_max_tokens_per_rank;
  max_tokens_ = a_.num_max_tokens_per_rank == 0 ? default_tokens : a_.num_max_tokens_per_rank;
  if (!checks_.any() && handle_ != nullptr && max_tokens_ != routing_->num_max_tokens_per_rank) {
    checks_.refuse(fmt::format("num_max_tokens_per_rank={} differs from the handle's {}",
                               max_tokens_, routing_->num_max_tokens_per_rank));
  }
  if (!checks_.any() && tokens_ > max_tokens_) {
    checks_.refuse(
        fmt::format("x has {} tokens, more than num_max_tokens_per_rank={}", tokens_, max_tokens_));
  }
  slot_ = ElasticBuffer::dispatch_slot_bytes(x_row_ + sf_row_, static_cast<int>(topk_));
  const bool cached = handle_ != nullptr && routing_ != nullptr;
  shape_ = {tokens_,
            topk_,
            num_experts_,
            local_,
            max_tokens_,
            a_.expert_alignment != 0 ? a_.expert_alignment
            : cached                 ? routing_->expert_alignment
                                     : 1,
            x_row_,
            a_.do_expand != 0,
            cached ? routing_->do_cpu_sync : a_.do_cpu_sync != 0};
}

// A fresh routing: topk_idx and num_experts, each index in -1..num_experts-1.
void DispatchCall::check_routing() {
  num_experts_ = a_.num_experts;
  if (!checks_.range("num_experts", num_experts_, 1)) return;
  const shmoe_tensor_t& idx = a_.topk_idx;
  if (!checks_.tensor(idx, "topk_idx", {SHMOE_DTYPE_INT64, SHMOE_DTYPE_INT32}, {{}, {}})) return;
  topk_ = idx.shape[1];
  if (!checks_.range("topk_idx.shape[1] (num_topk)", topk_, 1)) return;
  routing_ = std::make_shared<Routing>();
  routing_->topk_idx.resize(static_cast<std::size_t>(idx.shape[0] * topk_));
  for (std::size_t i = 0; i < routing_->topk_idx.size(); ++i) {
    const std::int64_t e = idx.dtype == SHMOE_DTYPE_INT64
                               ? static_cast<const std::int64_t*>(idx.data)[i]
                               : static_cast<const std::int32_t*>(idx.data)[i];
    if (e < -1 || e >= num_experts_) {
      checks_.refuse(fmt::format("topk_idx[{}][{}]={} is out of range (0..{}, or -1 for none)",
                                 static_cast<std::int64_t>(i) / topk_,
                                 static_cast<std::int64_t>(i) % topk_, e, num_experts_ - 1));
      return;
    }
    routing_->topk_idx[i] = static_cast<std::int32_t>(e);
  }
  if (!checks_.any() && idx.shape[0] != a_.x.shape[0] && checks_.given(a_.x)) {
    checks_.refuse(
        fmt::format("topk_idx has {} rows but x has {} tokens", idx.shape[0], a_.x.shape[0]));
  }
}

// A cached dispatch: the handle's routing, the same shapes as its dispatch.
void DispatchCall::check_cached() {
  if (handle_->routing == nullptr || handle_->cached) {
    return checks_.refuse("handle is not the result of a (non-cached) dispatch");
  }
  const Routing& h = *handle_->routing;
  if (h.buffer != &b_ || h.epoch != b_.id()) {
    return checks_.refuse("handle comes from another ElasticBuffer");
  }
  routing_ = handle_->routing;
  num_experts_ = h.num_experts;
  topk_ = h.num_topk;
  if (checks_.given(a_.topk_idx)) checks_.refuse("topk_idx is given with a handle; pass one");
  if (a_.num_experts != 0 && a_.num_experts != h.num_experts) {
    checks_.refuse(
        fmt::format("num_experts={} differs from the handle's {}", a_.num_experts, h.num_experts));
  }
  const int align = a_.expert_alignment == 0 ? h.expert_alignment : a_.expert_alignment;
  if (align != h.expert_alignment) {
    checks_.refuse(
        fmt::format("expert_alignment={} differs from the handle's {}", align, h.expert_alignment));
  }
  if (static_cast<bool>(a_.do_expand) != h.do_expand) {
    checks_.refuse(fmt::format("do_expand={} differs from the handle's dispatch ({})",
                               a_.do_expand != 0, h.do_expand));
  }
  if (checks_.given(a_.x) && a_.x.ndim == 2 &&
      (a_.x.shape[0] != h.num_tokens || row_bytes(a_.x) != h.x_row_bytes)) {
    checks_.refuse(
        fmt::format("x has shape {} ({} bytes a row); the handle's dispatch had {} "
                    "tokens of {} bytes",
                    shape_text(a_.x), row_bytes(a_.x), h.num_tokens, h.x_row_bytes));
  }
}

// Every token into the slots of the ranks it goes to: mapped windows directly, others staged
// and put; x into the receivers' blocks where they take them.
void DispatchCall::send() {
  const int n = b_.num_ranks(), me = b_.rank();
  const auto K = static_cast<std::size_t>(topk_);
  dst_slot_.assign(static_cast<std::size_t>(tokens_) * K, -1);
  std::vector<std::int32_t> count(static_cast<std::size_t>(n), 0);
  std::vector<std::byte*> mapped(static_cast<std::size_t>(n));
  staged_.resize(static_cast<std::size_t>(n));
  for (int j = 0; j < n; ++j) {
    mapped[static_cast<std::size_t>(j)] = static_cast<std::byte*>(shmem_ptr(b_.window(), j));
    if (mapped[static_cast<std::size_t>(j)] == nullptr) {
      staged_[static_cast<std::size_t>(j)] =
          std::make_unique_for_overwrite<std::byte[]>(static_cast<std::size_t>(tokens_ * slot_));
    }
  }
  const auto* x = static_cast<const std::byte*>(a_.x.data);
  std::vector<int> slot_of(static_cast<std::size_t>(n));
  for (std::int64_t t = 0; t < tokens_; ++t) {
    const std::int32_t* ids = topk() + t * topk_;
    std::fill(slot_of.begin(), slot_of.end(), -1);
    for (std::size_t k = 0; k < K; ++k) {
      if (ids[k] < 0) continue;
      const int j = ids[k] / static_cast<int>(local_);
      const auto uj = static_cast<std::size_t>(j);
      const bool direct = landing_ && landing_->direct(j);
      if (slot_of[uj] < 0) {
        slot_of[uj] = count[uj]++;
        std::byte* base =
            mapped[uj] != nullptr ? mapped[uj] + me * max_tokens_ * slot_ : staged_[uj].get();
        write_slot(base + slot_of[uj] * slot_, j, t);
        if (direct && !shape_.expand)
          landing_->write(j, landing_->token_row(j, slot_of[uj]), x + t * x_row_);
      }
      if (direct && shape_.expand)
        landing_->write(j, landing_->next_pair_row(ids[k]), x + t * x_row_);
      dst_slot_[static_cast<std::size_t>(t) * K + k] =
          static_cast<std::int32_t>(me * max_tokens_ + slot_of[uj]);
    }
  }
  for (int j = 0; j < n; ++j) {
    const auto uj = static_cast<std::size_t>(j);
    if (mapped[uj] == nullptr && count[uj] > 0) {
      shmem_putmem_nbi(b_.window() + me * max_tokens_ * slot_, staged_[uj].get(),
                       static_cast<std::size_t>(count[uj] * slot_), j);
    }
    shmem_int32_p(b_.counts() + me, count[uj], j);
  }
}

// Slot `s` for token t at rank j: its index, top-k indices and weights, then its row and scales
// unless they went into j's block.
void DispatchCall::write_slot(std::byte* s, int j, std::int64_t t) const {
  const auto K = static_cast<std::size_t>(topk_);
  const auto token = static_cast<std::int32_t>(t);
  const auto* w = static_cast<const float*>(a_.topk_weights.data);
  std::memcpy(s, &token, 4);
  std::memcpy(s + 4, topk() + t * topk_, 4 * K);
  if (w != nullptr) {
    std::memcpy(s + 4 + 4 * K, w + t * topk_, 4 * K);
  } else {
    std::memset(s + 4 + 4 * K, 0, 4 * K);
  }
  if (landing_ && landing_->direct(j)) return;
  std::memcpy(s + 4 + 8 * K, static_cast<const std::byte*>(a_.x.data) + t * x_row_,
              static_cast<std::size_t>(x_row_));
  if (sf_row_ != 0) {
    std::memcpy(s + 4 + 8 * K + x_row_, static_cast<const std::byte*>(a_.sf.data) + t * sf_row_,
                static_cast<std::size_t>(sf_row_));
  }
}

// The received tokens' routing, in source order, and each local expert's count.
void DispatchCall::receive() {
  const int n = b_.num_ranks(), me = b_.rank();
  const auto K = static_cast<std::size_t>(topk_);
  Routing fresh;
  Routing& r = handle_ == nullptr ? *routing_ : fresh;
  per_expert_.assign(static_cast<std::size_t>(local_), 0);
  for (int i = 0; i < n; ++i) {
    const std::byte* base = b_.window() + i * max_tokens_ * slot_;
    for (std::int32_t k = 0; k < b_.counts()[i]; ++k) {
      const std::byte* s = base + k * slot_;
      std::int32_t token = 0;
      std::memcpy(&token, s, 4);
      r.src_rank.push_back(i);
      r.src_token.push_back(token);
      for (std::size_t c = 0; c < K; ++c) {
        std::int32_t e = 0;
        std::memcpy(&e, s + 4 + 4 * c, 4);
        const bool local = e >= me * local_ && e < (me + 1) * local_;
        r.local_expert.push_back(local ? static_cast<std::int32_t>(e - me * local_) : -1);
        if (local) ++per_expert_[static_cast<std::size_t>(e - me * local_)];
      }
    }
  }
  if (handle_ != nullptr) {
    if (r.src_rank != routing_->src_rank || r.src_token != routing_->src_token) {
      throw std::runtime_error(std::string(kCall) +
                               ": a cached dispatch received other tokens than its handle's "
                               "dispatch (a rank passed another handle)");
    }
    return;
  }
  // First dispatch of this routing: the layout every later call of the handle reuses.
  r.num_tokens = static_cast<int>(tokens_);
  r.num_topk = static_cast<int>(topk_);
  r.num_experts = static_cast<int>(num_experts_);
  r.num_max_tokens_per_rank = static_cast<int>(max_tokens_);
  r.expert_alignment = a_.expert_alignment == 0 ? 1 : a_.expert_alignment;
  r.do_expand = a_.do_expand != 0;
  r.do_cpu_sync = a_.do_cpu_sync != 0;
  r.x_row_bytes = x_row_;
  r.sf_row_bytes = sf_row_;
  r.x_dtype = a_.x.dtype;
  r.buffer = &b_;
  r.epoch = b_.id();
  r.num_recv_tokens = static_cast<std::int64_t>(r.src_rank.size());
  const std::int64_t align = r.expert_alignment;
  std::int64_t start = 0;
  std::vector<std::int64_t> fill(static_cast<std::size_t>(local_));
  for (std::int64_t e = 0; e < local_; ++e) {
    fill[static_cast<std::size_t>(e)] = start;
    start += align_up(per_expert_[static_cast<std::size_t>(e)], align);
  }
  r.num_expanded_tokens = start;
  r.expanded_row.assign(r.local_expert.size(), -1);
  for (std::size_t i = 0; i < r.local_expert.size(); ++i) {
    if (r.local_expert[i] >= 0) {
      r.expanded_row[i] =
          static_cast<std::int32_t>(fill[static_cast<std::size_t>(r.local_expert[i])]++);
    }
  }
  const std::int64_t worst_rows = n * max_tokens_;
  r.recv_rows = r.do_cpu_sync ? r.num_recv_tokens : worst_rows;
  r.expanded_rows = r.do_cpu_sync
                        ? r.num_expanded_tokens
                        : worst_rows * std::min<std::int64_t>(topk_, local_) + local_ * (align - 1);
}

// Copies `src`'s row (`cols` elements of `es` bytes) into row `row` of `dst`, strided or not.
void copy_row(shmoe_tensor_t& dst, std::int64_t row, const std::byte* src, std::int64_t cols,
              std::size_t es) {
  auto* base = static_cast<std::byte*>(dst.data);
  if (dst.strides[1] == 1) {
    std::memcpy(base + static_cast<std::size_t>(row * dst.strides[0]) * es, src,
                static_cast<std::size_t>(cols) * es);
    return;
  }
  for (std::int64_t c = 0; c < cols; ++c) {
    std::memcpy(base + static_cast<std::size_t>(row * dst.strides[0] + c * dst.strides[1]) * es,
                src + static_cast<std::size_t>(c) * es, es);
  }
}

// recv_x, recv_sf, recv_topk_idx and recv_topk_weights, in the handle's layout.
void DispatchCall::write_rows() {
  const Routing& r = *routing_;
  const int n = b_.num_ranks();
  const std::int64_t K = topk_, rows = r.do_expand ? r.expanded_rows : r.recv_rows;
  const bool zero = r.do_expand && a_.do_zero_padding != 0;
  const std::int64_t x_cols = a_.x.shape[1], sf_cols = sf_row_ == 0 ? 0 : a_.sf.shape[1];
  const std::size_t x_es = dtype_bytes(a_.x.dtype), sf_es = dtype_bytes(a_.sf.dtype);
  shmoe_tensor_t& rx = recv_x(rows, x_cols, zero);
  shmoe_tensor_t* rsf = nullptr;
  if (sf_row_ != 0) {
    rsf = a_.use_tma_aligned_col_major_sf
              ? &result_->add_column_major("recv_sf", a_.sf.dtype, rows, sf_cols, 4, zero)
              : &result_->add("recv_sf", a_.sf.dtype, {rows, sf_cols}, zero);
  }
  std::int64_t* ridx = nullptr;
  if (!r.do_expand) {
    ridx = static_cast<std::int64_t*>(
        result_->add("recv_topk_idx", SHMOE_DTYPE_INT64, {rows, K}).data);
    std::fill(ridx, ridx + rows * K, -1);
  }
  float* rw = nullptr;
  if (with_weights_) {
    rw = static_cast<float*>(
        (r.do_expand ? result_->add("recv_topk_weights", SHMOE_DTYPE_FLOAT32, {rows}, true)
                     : result_->add("recv_topk_weights", SHMOE_DTYPE_FLOAT32, {rows, K}, true))
            .data);
  }
  std::size_t q = 0;
  for (int i = 0; i < n; ++i) {
    for (std::int32_t k = 0; k < b_.counts()[i]; ++k, ++q) {
      const std::byte* s = b_.window() + (i * max_tokens_ + k) * slot_;
      const auto* w = reinterpret_cast<const float*>(s + 4 + 4 * K);
      const std::byte* xs = s + 4 + 8 * K;
      for (std::int64_t c = 0; c < K; ++c) {
        const std::size_t at = q * static_cast<std::size_t>(K) + static_cast<std::size_t>(c);
        if (!r.do_expand) {
          ridx[at] = r.local_expert[at];
          if (rw != nullptr) std::memcpy(rw + at, w + c, 4);
          continue;
        }
        const std::int64_t pos = r.expanded_row[at];
        if (pos < 0) continue;
        if (!direct_) copy_row(rx, pos, xs, x_cols, x_es);
        if (rsf != nullptr) copy_row(*rsf, pos, xs + x_row_, sf_cols, sf_es);
        if (rw != nullptr) std::memcpy(rw + pos, w + c, 4);
      }
      if (!r.do_expand) {
        if (!direct_) copy_row(rx, static_cast<std::int64_t>(q), xs, x_cols, x_es);
        if (rsf != nullptr)
          copy_row(*rsf, static_cast<std::int64_t>(q), xs + x_row_, sf_cols, sf_es);
      }
    }
  }
  if (checks_.given(a_.cumulative_local_expert_recv_stats)) {
    auto* stats = static_cast<std::int32_t*>(a_.cumulative_local_expert_recv_stats.data);
    for (std::int64_t e = 0; e < local_; ++e) {
      stats[e] += static_cast<std::int32_t>(per_expert_[static_cast<std::size_t>(e)]);
    }
  }
}

// recv_x: this rank's block, where its senders wrote the rows, else a fresh array to copy into.
shmoe_tensor_t& DispatchCall::recv_x(std::int64_t rows, std::int64_t cols, bool zero) {
  if (!landing_) b_.result_counts().count(false);
  std::shared_ptr<std::byte[]> block = landing_ ? landing_->lend(b_.result_counts()) : nullptr;
  if (!block) return result_->add("recv_x", a_.x.dtype, {rows, cols}, zero);
  if (landing_->rows() != rows) {
    throw std::logic_error(fmt::format("{}: the block holds {} rows of recv_x, not {}", kCall,
                                       landing_->rows(), rows));
  }
  if (zero) zero_gaps(landing_->mine(), rows);
  direct_ = true;
  return result_->add_over("recv_x", a_.x.dtype, {rows, cols}, std::move(block), landing_->mine());
}

// Zeroes the rows of an expanded recv_x that no sender wrote (do_zero_padding): each expert's
// alignment padding and the rows past the last expert's.
void DispatchCall::zero_gaps(std::byte* rows, std::int64_t total) const {
  const auto bytes = static_cast<std::size_t>(x_row_);
  std::int64_t start = 0;
  for (const std::int64_t c : per_expert_) {
    const std::int64_t end = align_up(c, shape_.align);
    std::memset(rows + (start + c) * x_row_, 0, static_cast<std::size_t>(end - c) * bytes);
    start += end;
  }
  std::memset(rows + start * x_row_, 0, static_cast<std::size_t>(total - start) * bytes);
}

// The handle's arrays (DeepEP's EPHandle fields).
void DispatchCall::write_handle() {
  const Routing& r = *routing_;
  const std::int64_t K = topk_, S = b_.logical_scaleup(), align = r.expert_alignment;
  auto ints = [&](const char* name, std::initializer_list<std::int64_t> shape) {
    return static_cast<std::int32_t*>(result_->add(name, SHMOE_DTYPE_INT32, shape, true).data);
  };
  std::int32_t* per_scaleup = ints("psum_num_recv_tokens_per_scaleup_rank", {S});
  for (std::int32_t i : r.src_rank) ++per_scaleup[i % S];
  for (std::int64_t s = 1; s < S; ++s) per_scaleup[s] += per_scaleup[s - 1];
  std::int32_t* psum = ints("psum_num_recv_tokens_per_expert", {local_});
  std::int32_t* aligned = ints("num_recv_tokens_per_expert", {local_});
  std::int32_t* unaligned = ints("num_unaligned_recv_tokens_per_expert", {local_});
  std::int64_t start = 0;
  for (std::int64_t e = 0; e < local_; ++e) {
    const std::int64_t c = per_expert_[static_cast<std::size_t>(e)];
    unaligned[e] = static_cast<std::int32_t>(c);
    aligned[e] = static_cast<std::int32_t>(align_up(c, align));
    // Expand mode: the expert's aligned start plus its count; else the inclusive prefix.
    psum[e] = static_cast<std::int32_t>(r.do_expand ? start + c : start + align_up(c, align));
    start += align_up(c, align);
  }
  std::int32_t* meta = ints("recv_src_metadata", {r.recv_rows, 2 + K});
  std::fill(meta, meta + r.recv_rows * (2 + K), -1);
  std::vector<std::int32_t> next(static_cast<std::size_t>(b_.num_ranks()), 0);
  for (std::size_t q = 0; q < r.src_rank.size(); ++q) {
    std::int32_t* m = meta + static_cast<std::int64_t>(q) * (2 + K);
    const std::int32_t i = r.src_rank[q];
    m[0] = static_cast<std::int32_t>(i * max_tokens_ + r.src_token[q]);
    m[1] = static_cast<std::int32_t>(i * max_tokens_ + next[static_cast<std::size_t>(i)]++);
    if (r.do_expand) {
      std::copy_n(r.expanded_row.begin() + static_cast<std::ptrdiff_t>(q * K), K, m + 2);
    }
  }
  std::copy(dst_slot_.begin(), dst_slot_.end(), ints("dst_buffer_slot_idx", {tokens_, K}));
  auto scalar = [&](const char* name, std::int64_t v) {
    *static_cast<std::int64_t*>(result_->add(name, SHMOE_DTYPE_INT64, {}).data) = v;
  };
  scalar("num_recv_tokens", r.num_recv_tokens);
  scalar("num_expanded_tokens", r.num_expanded_tokens);
  if (a_.do_handle_copy) {
    shmoe_tensor_t& copy = result_->add("topk_idx", a_.topk_idx.dtype, {tokens_, K});
    std::memcpy(copy.data, a_.topk_idx.data,
                static_cast<std::size_t>(tokens_ * K) * dtype_bytes(a_.topk_idx.dtype));
  }
  result_->routing = routing_;
}

}  // namespace

shmoe_ep_result* ElasticBuffer::dispatch(const shmoe_elastic_dispatch_args_t& args) {
  return DispatchCall(*this, args)();
}

}  // namespace shmoe::deep_ep
