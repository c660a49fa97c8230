// IntranodeBuffer::dispatch as call objects: each phase a method, the collective steps in
// operator(). A dispatch is one operator call whose verdict every rank learns before anything
// moves: proceed, refuse (this rank's arguments are wrong: every rank raises) or retry (the
// operators cannot hold this call: every rank replans, collectively, and calls again).
#include <fmt/format.h>
#include <shmem.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "deep_ep/checks.hpp"
#include "deep_ep/intranode_buffer.hpp"
#include "moe/moe.hpp"
#include "shmoe/runtime.hpp"

namespace shmoe::deep_ep {
namespace {

constexpr const char* kCall = "deep_ep.Buffer.dispatch";

// The operator's dispatch with a verdict other than proceed: nothing else is read.
int dispatch_verdict(MoeBuffer& op, shmoe_call_verdict_t verdict) {
  DispatchArgs args;
  args.verdict = verdict;
  DispatchOutputs outs;
  return op.dispatch(args, outs);
}

// A token's row as it travels: x's bytes, then those of its scales (DeepEP's FP8 pair), if any.
struct RowFormat {
  std::int64_t hidden = 0, x_row = 0, sf_cols = 0;
  std::int64_t bytes() const { return x_row + 4 * sf_cols; }
  std::int64_t units() const { return bytes() / 2; }
};

// Refuses x [tokens, hidden] and x_scales [tokens, any] (float32 or int32, or none) unless they
// make rows of whole 2-byte units (tokens < 0: any); *f gets their format.
bool check_rows(Checks& c, const shmoe_tensor_t& x, const shmoe_tensor_t& sf, std::int64_t tokens,
                RowFormat* f) {
  if (!c.tensor(x, "x", {x.dtype}, {{tokens < 0 ? Dim::kAny : tokens}, {}})) return false;
  f->hidden = x.shape[1];
  f->x_row = f->hidden * static_cast<std::int64_t>(dtype_bytes(x.dtype));
  if (c.given(sf)) {
    if (!c.tensor(sf, "x_scales", {SHMOE_DTYPE_FLOAT32, SHMOE_DTYPE_INT32}, {{x.shape[0]}, {}})) {
      return false;
    }
    f->sf_cols = sf.shape[1];
  }
  if (f->hidden < 1 || f->bytes() % 2 != 0) {
    c.refuse(fmt::format(
        "x ({} of shape {}) with its scales ({} columns) must be [tokens, hidden] with hidden >= 1 "
        "and rows of whole 2-byte units (DeepEP asks for 16-byte rows)",
        dtype_name(x.dtype), shape_text(x), f->sf_cols));
    return false;
  }
  return true;
}

// The rows the operator sends: x's own, or x's with each token's scales after its values.
const void* travelling_rows(const shmoe_tensor_t& x, const shmoe_tensor_t& sf, const RowFormat& f,
                            std::vector<std::byte>& staging) {
  if (f.sf_cols == 0) return x.data;
  const std::int64_t tokens = x.shape[0], row = f.bytes(), sf_row = 4 * f.sf_cols;
  staging.resize(static_cast<std::size_t>(tokens * row));
  for (std::int64_t t = 0; t < tokens; ++t) {
    std::byte* to = staging.data() + t * row;
    std::memcpy(to, static_cast<const std::byte*>(x.data) + t * f.x_row,
                static_cast<std::size_t>(f.x_row));
    std::memcpy(to + f.x_row, static_cast<const std::byte*>(sf.data) + t * sf_row,
                static_cast<std::size_t>(sf_row));
  }
  return staging.data();
}

// recv_x (and recv_x_scales) of `rows` rows received into `block`, zero-padded to `out` rows.
void add_received(shmoe_ep_result& r, const std::shared_ptr<std::byte[]>& block, std::int64_t rows,
                  std::int64_t out, const shmoe_tensor_t& x, const shmoe_tensor_t& sf,
                  const RowFormat& f) {
  if (f.sf_cols == 0) {
    std::memset(block.get() + rows * f.x_row, 0, static_cast<std::size_t>((out - rows) * f.x_row));
    r.add_over("recv_x", x.dtype, {out, f.hidden}, block, block.get());
    return;
  }
  auto* values = static_cast<std::byte*>(r.add("recv_x", x.dtype, {out, f.hidden}, true).data);
  auto* scales =
      static_cast<std::byte*>(r.add("recv_x_scales", sf.dtype, {out, f.sf_cols}, true).data);
  const std::int64_t row = f.bytes(), sf_row = 4 * f.sf_cols;
  for (std::int64_t i = 0; i < rows; ++i) {
    const std::byte* from = block.get() + i * row;
    std::memcpy(values + i * f.x_row, from, static_cast<std::size_t>(f.x_row));
    std::memcpy(scales + i * sf_row, from + f.x_row, static_cast<std::size_t>(sf_row));
  }
}

// Where a dispatch's rows land: a free receive block of the plan's dispatch operator (Landing),
// unless the call goes through another operator (a cached dispatch of another row size), its
// rows carry FP8 scales to split or it asks for more rows than a block holds
// (num_worst_tokens): then (or while every block is held) a block of the buffer's pools that the
// operator copies them into.
class PoolLanding {
 public:
  PoolLanding(IntranodeBuffer& b, IntranodePlan& p, const MoeBuffer& op, std::int64_t rows,
              const RowFormat& f)
      : b_(b),
        landing_(p.lender, &op == p.x.get() && f.sf_cols == 0 &&
                               rows == static_cast<std::int64_t>(p.n) * p.capacity) {
    if (!landing_.direct()) rows_ = b.block(static_cast<std::size_t>(rows * f.bytes()));
  }
  void aim(DispatchOutputs& outs) { landing_.aim(outs, rows_.get()); }
  // The rows, once the operator's dispatch returned `got` rows (not kRetry).
  const std::shared_ptr<std::byte[]>& rows(int got) {
    if (auto lent = landing_.lend(got, b_.counts())) rows_ = std::move(lent);
    return rows_;
  }

 private:
  IntranodeBuffer& b_;
  Landing landing_;
  std::shared_ptr<std::byte[]> rows_;
};

class IntranodeDispatch {
 public:
  IntranodeDispatch(IntranodeBuffer& b, const shmoe_intranode_dispatch_args_t& a)
      : b_(b), a_(a), checks_(kCall), n_(b.num_ranks()), me_(b.rank()) {
    check();
  }
  const std::string& why() const { return checks_.why(); }
  const IntranodeShape& shape() const { return shape_; }

  // The call on plan p: the result, or nullptr when some rank asked for a retry.
  shmoe_ep_result* operator()(IntranodePlan& p) {
    if (checks_.any() || !p.fits(shape_)) {
      try {
        if (dispatch_verdict(*p.x, checks_.any() ? SHMOE_CALL_REFUSE : SHMOE_CALL_RETRY) ==
            MoeBuffer::kRetry) {
          return nullptr;
        }
      } catch (const Error&) {
        if (!checks_.any()) throw;  // another rank refused
      }
      throw moe::Refused(checks_.why());
    }
    p_ = &p;
    pack();
    const int rows = send();
    if (rows == MoeBuffer::kRetry) return nullptr;
    check_ranks();
    rows_ = rows;
    write_received();
    write_matrices();
    write_internode();
    write_handle();
    return result_.release();
  }

 private:
  void check();
  void check_topk();
  void write_internode();
  void pack();
  int send();
  void check_ranks() const;
  void write_received();
  void write_matrices();
  void write_handle();

  IntranodeBuffer& b_;
  const shmoe_intranode_dispatch_args_t& a_;
  Checks checks_;
  const int n_, me_;
  IntranodeShape shape_;
  RowFormat f_;
  std::int64_t local_ = 0, K_ = 0;
  int align_ = 1;
  IntranodePlan* p_ = nullptr;
  std::unique_ptr<shmoe_ep_result> result_ = std::make_unique<shmoe_ep_result>();
  std::shared_ptr<IntranodeRouting> routing_;
  std::shared_ptr<std::byte[]> block_;  // the received rows
  std::vector<std::byte> staging_;      // x's rows with their scales
  std::vector<std::int32_t> all_ints_, counts_;
  std::int32_t nums_ = 0;
  int rows_ = 0;
};

void IntranodeDispatch::check() {
  if (a_.refusal != nullptr) checks_.refuse(a_.refusal);
  if (!checks_.any() && check_rows(checks_, a_.x, a_.x_scales, -1, &f_)) {
    shape_.tokens = a_.x.shape[0];
    shape_.units = f_.units();
  }
  const std::int64_t tokens = shape_.tokens;
  checks_.tensor(a_.num_tokens_per_rank, "num_tokens_per_rank", {SHMOE_DTYPE_INT32}, {{n_}});
  checks_.tensor(a_.is_token_in_rank, "is_token_in_rank", {SHMOE_DTYPE_BOOL}, {{tokens}, {n_}});
  if (checks_.given(a_.num_tokens_per_rdma_rank)) {
    checks_.tensor(a_.num_tokens_per_rdma_rank, "num_tokens_per_rdma_rank", {SHMOE_DTYPE_INT32},
                   {{b_.num_hosts()}});
  }
  if (checks_.tensor(a_.num_tokens_per_expert, "num_tokens_per_expert", {SHMOE_DTYPE_INT32},
                     {{}})) {
    shape_.experts = a_.num_tokens_per_expert.shape[0];
    if (shape_.experts < 1 || shape_.experts % n_ != 0) {
      checks_.refuse(fmt::format(
          "num_tokens_per_expert (int32 of shape {}) must be [num_experts] with num_experts a "
          "positive multiple of the {} ranks",
          shape_text(a_.num_tokens_per_expert), n_));
    }
    local_ = shape_.experts / n_;
  }
  align_ = a_.expert_alignment == 0 ? 1 : a_.expert_alignment;
  checks_.range("expert_alignment", align_, 1);
  checks_.range("num_worst_tokens", a_.num_worst_tokens, 0);
  check_topk();
}

// topk_idx and topk_weights: both or neither, each index in -1..num_experts-1.
void IntranodeDispatch::check_topk() {
  const bool idx = checks_.given(a_.topk_idx), w = checks_.given(a_.topk_weights);
  if (!checks_.any() && idx != w) {
    checks_.refuse("topk_idx and topk_weights go together (one is None)");
  }
  if (checks_.any() || !idx) return;
  if (!checks_.tensor(a_.topk_idx, "topk_idx", {SHMOE_DTYPE_INT64}, {{shape_.tokens}, {}})) return;
  K_ = a_.topk_idx.shape[1];
  shape_.topk = K_;
  checks_.tensor(a_.topk_weights, "topk_weights", {SHMOE_DTYPE_FLOAT32}, {{shape_.tokens}, {K_}});
  const auto* ids = static_cast<const std::int64_t*>(a_.topk_idx.data);
  for (std::int64_t i = 0; !checks_.any() && i < shape_.tokens * K_; ++i) {
    if (ids[i] < -1 || ids[i] >= shape_.experts) {
      checks_.refuse(fmt::format("topk_idx[{}][{}]={} is out of range (0..{}, or -1 for none)",
                                 i / K_, i % K_, ids[i], shape_.experts - 1));
    }
  }
}

// The routes (rank j for each token in rank j), each token's side data (its top-k indices, then
// its weights' bits; the receiver reads floats) and the header ints.
void IntranodeDispatch::pack() {
  const std::int64_t tokens = shape_.tokens;
  routing_ = std::make_shared<IntranodeRouting>();
  routing_->routes.resize(static_cast<std::size_t>(tokens * n_));
  const auto* routed = static_cast<const bool*>(a_.is_token_in_rank.data);
  for (std::size_t i = 0; i < routing_->routes.size(); ++i) {
    routing_->routes[i] = routed[i] ? static_cast<std::int32_t>(i % n_) : -1;
  }
  const auto* ids = static_cast<const std::int64_t*>(a_.topk_idx.data);
  const auto* weights = static_cast<const std::int32_t*>(a_.topk_weights.data);
  const std::int64_t W = p_->side_width, half = W / 2;
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t k = 0; k < K_; ++k) {
      p_->side[t * W + k] = static_cast<std::int32_t>(ids[t * K_ + k]);
      p_->side[t * W + half + k] = weights[t * K_ + k];
    }
  }
  p_->ints[0] = static_cast<std::int32_t>(K_);
  p_->ints[1] = a_.num_worst_tokens;
  std::memcpy(p_->ints.data() + kIntranodeHeader, a_.num_tokens_per_expert.data,
              static_cast<std::size_t>(shape_.experts) * 4);
  all_ints_.resize(static_cast<std::size_t>(n_) * p_->ints.size());
  counts_.resize(static_cast<std::size_t>(n_) * n_);
}

// The operator's dispatch (its rows where Landing says): the rows received, or kRetry.
int IntranodeDispatch::send() {
  const auto cap = static_cast<std::int64_t>(n_) * p_->capacity;
  PoolLanding landing(b_, *p_, *p_->x, std::max<std::int64_t>(cap, a_.num_worst_tokens), f_);
  routing_->src_info.resize(static_cast<std::size_t>(cap) * 3);
  routing_->layout_prefix.resize(static_cast<std::size_t>(n_));
  DispatchArgs args;  // no pe_mask: normal mode is never in shrink mode
  args.x = travelling_rows(a_.x, a_.x_scales, f_, staging_);
  args.topk_idx = routing_->routes.data();
  args.num_tokens = static_cast<int>(shape_.tokens);
  args.token_side = p_->side.data();
  args.header_ints = p_->ints.data();
  DispatchOutputs outs;
  landing.aim(outs);
  outs.recv_src_info = routing_->src_info.data();
  outs.recv_layout_prefix = routing_->layout_prefix.data();
  outs.num_recv_tokens_per_expert = &nums_;
  outs.recv_token_side = p_->recv_side.data();
  outs.all_header_ints = all_ints_.data();
  outs.all_counts = counts_.data();
  const int got = p_->x->dispatch(args, outs);
  block_ = landing.rows(got);
  return got;
}

// The checks that need every rank's header: the same data on every rank, so the same verdict.
void IntranodeDispatch::check_ranks() const {
  const std::size_t width = p_->ints.size();
  const std::int32_t k = all_ints_[static_cast<std::size_t>(me_) * width];
  for (int j = 0; j < n_; ++j) {
    const std::int32_t kj = all_ints_[static_cast<std::size_t>(j) * width];
    if (kj != k) {
      throw moe::Refused(fmt::format(
          "{}: ranks disagree on num_topk: rank {} passed top-k indices of {} columns, rank {} "
          "of {}",
          kCall, j, kj, me_, k));
    }
  }
  for (int j = 0; j < n_; ++j) {
    std::int64_t rows = 0;
    for (int i = 0; i < n_; ++i) rows += counts_[static_cast<std::size_t>(i) * n_ + j];
    const std::int32_t worst = all_ints_[static_cast<std::size_t>(j) * width + 1];
    if (worst > 0 && worst < rows) {
      throw moe::Refused(
          fmt::format("{}: rank {} passed num_worst_tokens={}, fewer than the {} tokens it "
                      "receives",
                      kCall, j, worst, rows));
    }
  }
}

// recv_x and recv_x_scales (zero-padded to num_worst_tokens), recv_topk_idx (local expert, or -1)
// and recv_topk_weights (0 where not local).
void IntranodeDispatch::write_received() {
  const std::int64_t R = rows_, out = a_.num_worst_tokens > 0 ? a_.num_worst_tokens : R;
  add_received(*result_, block_, R, out, a_.x, a_.x_scales, f_);
  if (K_ == 0) return;
  auto* li =
      static_cast<std::int64_t*>(result_->add("recv_topk_idx", SHMOE_DTYPE_INT64, {out, K_}).data);
  auto* kw = static_cast<float*>(
      result_->add("recv_topk_weights", SHMOE_DTYPE_FLOAT32, {out, K_}, true).data);
  std::fill(li + R * K_, li + out * K_, -1);
  const std::int64_t W = p_->side_width, half = W / 2, first = me_ * local_;
  for (std::int64_t r = 0; r < R; ++r) {
    for (std::int64_t k = 0; k < K_; ++k) {
      const std::int64_t e = p_->recv_side[r * W + k] - first;
      const bool mine = e >= 0 && e < local_;
      li[r * K_ + k] = mine ? e : -1;
      float v = 0.0f;
      if (mine) std::memcpy(&v, &p_->recv_side[r * W + half + k], 4);
      kw[r * K_ + k] = v;
    }
  }
}

// rank_prefix_matrix, channel_prefix_matrix, recv_channel_prefix_matrix, recv_src_idx,
// send_head and the tokens per local expert.
void IntranodeDispatch::write_matrices() {
  const std::size_t P = static_cast<std::size_t>(n_), me = static_cast<std::size_t>(me_);
  auto* pm = static_cast<std::int32_t*>(
      result_->add("rank_prefix_matrix", SHMOE_DTYPE_INT32, {n_, n_}).data);
  for (std::size_t i = 0; i < P; ++i) {
    for (std::size_t j = 0; j < P; ++j)
      pm[i * P + j] = counts_[i * P + j] + (i ? pm[(i - 1) * P + j] : 0);
  }
  auto* ch = static_cast<std::int32_t*>(
      result_->add("channel_prefix_matrix", SHMOE_DTYPE_INT32, {n_, 1}).data);
  auto* rch = static_cast<std::int32_t*>(
      result_->add("recv_channel_prefix_matrix", SHMOE_DTYPE_INT32, {n_, 1}).data);
  for (std::size_t j = 0; j < P; ++j) {
    ch[j] = counts_[me * P + j];
    rch[j] = counts_[j * P + me];
  }
  auto* src =
      static_cast<std::int32_t*>(result_->add("recv_src_idx", SHMOE_DTYPE_INT32, {rows_}).data);
  for (int r = 0; r < rows_; ++r) src[r] = routing_->src_info[3 * static_cast<std::size_t>(r) + 1];
  auto* head = static_cast<std::int32_t*>(
      result_->add("send_head", SHMOE_DTYPE_INT32, {shape_.tokens, n_}).data);
  std::vector<std::int32_t> sent(P, 0);
  for (std::size_t i = 0; i < routing_->routes.size(); ++i) {
    head[i] = routing_->routes[i] >= 0 ? sent[i % P]++ : -1;
  }
  const std::int64_t listed = a_.num_worst_tokens > 0 ? 0 : local_;
  auto* per_local = static_cast<std::int32_t*>(
      result_->add("num_recv_tokens_per_expert", SHMOE_DTYPE_INT32, {listed}).data);
  const std::size_t width = p_->ints.size();
  for (std::int64_t l = 0; l < listed; ++l) {
    std::int64_t sum = 0;
    for (std::size_t i = 0; i < P; ++i) {
      sum += all_ints_[i * width + kIntranodeHeader + static_cast<std::size_t>(me_ * local_ + l)];
    }
    per_local[l] = static_cast<std::int32_t>((sum + align_ - 1) / align_ * align_);
  }
}

// Over more than one host, DeepEP's internode handle arrays (one channel; its RDMA ranks are the
// hosts): the tokens this rank sends to each host, the rows it receives from each host and
// rank (inclusive prefix sums), each row's (source rank, source token), and each token's place
// among those this rank sends to each host (-1: none).
void IntranodeDispatch::write_internode() {
  const int H = b_.num_hosts(), L = n_ / H;
  if (H < 2) return;
  const auto ints = [&](const char* name, std::initializer_list<std::int64_t> shape) {
    return static_cast<std::int32_t*>(result_->add(name, SHMOE_DTYPE_INT32, shape, true).data);
  };
  auto* sent = ints("rdma_channel_prefix_matrix", {H, 1});
  auto* from_host = ints("recv_rdma_channel_prefix_matrix", {H, 1});
  auto* host_sum = ints("recv_rdma_rank_prefix_sum", {H});
  auto* rank_sum = ints("recv_gbl_rank_prefix_sum", {n_});
  auto* meta = ints("recv_src_meta", {rows_, 2});
  auto* head = ints("send_rdma_head", {shape_.tokens, H});
  for (int j = 0; j < n_; ++j) {
    const std::int32_t c = counts_[static_cast<std::size_t>(j) * n_ + me_];
    from_host[j / L] += c;
    rank_sum[j] = c + (j > 0 ? rank_sum[j - 1] : 0);
  }
  for (int h = 0; h < H; ++h) host_sum[h] = from_host[h] + (h > 0 ? host_sum[h - 1] : 0);
  for (int r = 0; r < rows_; ++r) {
    meta[2 * r] = routing_->src_info[3 * static_cast<std::size_t>(r)];
    meta[2 * r + 1] = routing_->src_info[3 * static_cast<std::size_t>(r) + 1];
  }
  for (std::int64_t t = 0; t < shape_.tokens; ++t) {
    for (int h = 0; h < H; ++h) {
      const std::int32_t* to = routing_->routes.data() + t * n_ + h * L;
      const bool goes = std::any_of(to, to + L, [](std::int32_t j) { return j >= 0; });
      head[t * H + h] = goes ? sent[h]++ : -1;
    }
  }
}

void IntranodeDispatch::write_handle() {
  IntranodeRouting& r = *routing_;
  r.buffer = &b_;
  r.epoch = p_->epoch;
  r.tokens = static_cast<int>(shape_.tokens);
  r.rows = rows_;
  r.num_topk = static_cast<int>(K_);
  r.hidden = f_.hidden;
  result_->state = routing_;
}

// A dispatch on a dispatch's routing (DeepEP's cached dispatch): x of the same tokens, any dtype
// and hidden (with scales or not, as DeepEP's), no side data. Every rank agrees on the row size
// before the operator's call: rows of another size go through that size's operator.
class CachedDispatch {
 public:
  CachedDispatch(IntranodeBuffer& b, const shmoe_intranode_dispatch_args_t& a)
      : b_(b), a_(a), checks_(kCall) {}

  shmoe_ep_result* operator()() {
    check();
    agree(SHMEM_TEAM_WORLD, kCall, checks_.why(), {{"x's row size (with its scales)", f_.bytes()}});
    IntranodePlan& p = *b_.plan();
    const bool own = f_.units() == p.units;
    MoeBuffer& op = own ? *p.x : p.combine_buffer(static_cast<int>(f_.units()));
    const auto cap = static_cast<std::int64_t>(b_.num_ranks()) * p.capacity;
    PoolLanding landing(b_, p, op, cap, f_);
    std::vector<std::int32_t> src_info(static_cast<std::size_t>(cap) * 3);
    std::vector<std::int32_t> prefix(static_cast<std::size_t>(b_.num_ranks()));
    std::int32_t nums = 0;
    std::vector<std::byte> staging;
    DispatchArgs args;
    args.x = travelling_rows(a_.x, a_.x_scales, f_, staging);
    args.topk_idx = h_->routes.data();
    args.num_tokens = h_->tokens;
    args.token_side = own ? p.no_side.data() : nullptr;
    args.header_ints = own ? p.no_ints.data() : nullptr;
    DispatchOutputs outs;
    landing.aim(outs);
    outs.recv_src_info = src_info.data();
    outs.recv_layout_prefix = prefix.data();
    outs.num_recv_tokens_per_expert = &nums;
    const int rows = op.dispatch(args, outs);
    auto result = std::make_unique<shmoe_ep_result>();
    add_received(*result, landing.rows(rows), rows, rows, a_.x, a_.x_scales, f_);
    result->cached = true;
    return result.release();
  }

 private:
  void check() {
    if (a_.refusal != nullptr) checks_.refuse(a_.refusal);
    std::string why;
    h_ = b_.current(a_.handle, &why);
    if (h_ == nullptr) checks_.refuse(why);
    if (!checks_.any() && (checks_.given(a_.topk_idx) || checks_.given(a_.topk_weights))) {
      checks_.refuse("a cached dispatch (handle=) takes no topk_idx or topk_weights");
    }
    if (!checks_.any()) check_rows(checks_, a_.x, a_.x_scales, h_->tokens, &f_);
  }

  IntranodeBuffer& b_;
  const shmoe_intranode_dispatch_args_t& a_;
  Checks checks_;
  const IntranodeRouting* h_ = nullptr;
  RowFormat f_;
};

}  // namespace

shmoe_ep_result* IntranodeBuffer::dispatch(const shmoe_intranode_dispatch_args_t& args) {
  if (args.handle != nullptr) return CachedDispatch(*this, args)();
  for (bool first = true;; first = false) {
    IntranodeDispatch call(*this, args);
    // The first dispatch has no operators yet: the replan's agreement refuses or sizes them.
    // After a retry every rank replans alike.
    if (plan() == nullptr || !first) replan(kCall, call.why(), call.shape());
    if (shmoe_ep_result* r = call(*plan())) return r;
  }
}

}  // namespace shmoe::deep_ep
