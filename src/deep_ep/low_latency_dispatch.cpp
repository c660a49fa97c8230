// LowLatencyBuffer::dispatch as a call object: check, agree, send (BF16 rows into the receive
// window, or FP8 message rows), receive (each local expert's rows into its slab of the result).
#include <fmt/format.h>
#include <shmem.h>

#include <cmath>
#include <cstring>

#include "deep_ep/checks.hpp"
#include "deep_ep/low_latency_buffer.hpp"
#include "moe/moe.hpp"
#include "shmoe/runtime.hpp"

namespace shmoe::deep_ep {
namespace {

constexpr const char* kCall = "deep_ep.Buffer.low_latency_dispatch";

// Adds the nanoseconds of the operator's last wait for each rank to stats (int64 [ranks]).
void add_waits(const shmoe_tensor_t& stats, MoeBuffer& op, std::vector<double>& us) {
  if (stats.data == nullptr) return;
  op.last_source_waits(us);
  auto* ns = static_cast<std::int64_t*>(stats.data);
  for (std::size_t j = 0; j < us.size(); ++j) ns[j] += std::llround(us[j] * 1000.0);
}

class LowLatencyDispatch {
 public:
  LowLatencyDispatch(LowLatencyBuffer& b, const shmoe_low_latency_dispatch_args_t& a)
      : b_(b), a_(a), n_(b.num_ranks()) {}

  shmoe_ep_result* operator()() {
    check();
    call_topk_ = s_.topk;
    if (b_.shrink()) {  // each rank checks its own; the others mask a rank that raises
      if (checks_.any()) throw moe::Refused(checks_.why());
      s_.topk = shrink_area_topk(s_.experts, s_.topk);
    } else {
      agree(SHMEM_TEAM_WORLD, kCall, checks_.why(),
            {{"num_max_dispatch_tokens_per_rank", s_.max_tokens},
             {"hidden", s_.hidden},
             {"num_experts", s_.experts},
             {"num_topk", s_.topk},
             {"use_fp8", a_.use_fp8 != 0 ? 1 : 0}});
    }
    LowLatencyAreas& areas = b_.areas(s_, kCall);
    MoeBuffer& op = send(areas);
    add_waits(a_.dispatch_wait_recv_cost_stats, op, areas.waits);
    return receive(areas);
  }

 private:
  void check();
  void check_tensors();
  MoeBuffer& send(LowLatencyAreas& areas);
  shmoe_ep_result* receive(LowLatencyAreas& areas);
  void copy_rows(LowLatencyAreas& areas, std::uint8_t* x, float* scales, std::int32_t* packed);

  LowLatencyBuffer& b_;
  const shmoe_low_latency_dispatch_args_t& a_;
  const int n_;
  Checks checks_{kCall};
  LowLatencyShape s_;
  int tokens_ = 0, call_topk_ = 0;
  int rows_ = 0;
  const void* recv_ = nullptr;         // the received rows (the receive window)
  std::shared_ptr<std::byte[]> lent_;  // or the receive block they were written into
  std::shared_ptr<LowLatencyRouting> routing_ = std::make_shared<LowLatencyRouting>();
};

void LowLatencyDispatch::check() {
  if (a_.refusal != nullptr) checks_.refuse(a_.refusal);
  checks_.range("num_max_dispatch_tokens_per_rank", a_.num_max_dispatch_tokens_per_rank, 1);
  checks_.range("num_experts", a_.num_experts, 1);
  if (!checks_.any() && a_.num_experts % n_ != 0) {
    checks_.refuse(
        fmt::format("num_experts={} is not divisible by the {} ranks", a_.num_experts, n_));
  }
  if (!checks_.any()) check_tensors();
  if (!checks_.any() && a_.use_ue8m0 != 0 && (a_.use_fp8 == 0 || a_.round_scale == 0)) {
    checks_.refuse(
        "use_ue8m0=True needs use_fp8=True and round_scale=True (UE8M0 scales are powers of two)");
  }
  const int local = checks_.any() ? 0 : a_.num_experts / n_;
  if (a_.cumulative_local_expert_recv_stats.data != nullptr) {
    checks_.tensor(a_.cumulative_local_expert_recv_stats, "cumulative_local_expert_recv_stats",
                   {SHMOE_DTYPE_INT32}, {{local}});
  }
  if (a_.dispatch_wait_recv_cost_stats.data != nullptr) {
    checks_.tensor(a_.dispatch_wait_recv_cost_stats, "dispatch_wait_recv_cost_stats",
                   {SHMOE_DTYPE_INT64}, {{n_}});
  }
}

void LowLatencyDispatch::check_tensors() {
  const int max_tokens = a_.num_max_dispatch_tokens_per_rank, experts = a_.num_experts;
  if (!checks_.tensor(a_.x, "x", {SHMOE_DTYPE_BFLOAT16}, {{}, {}})) return;
  const std::int64_t tokens = a_.x.shape[0], hidden = a_.x.shape[1];
  if (tokens > max_tokens) {
    checks_.refuse(
        fmt::format("x (shape {}) must be [tokens, hidden] with tokens at most "
                    "num_max_dispatch_tokens_per_rank={}",
                    shape_text(a_.x), max_tokens));
  } else if (hidden < kFp8Block || hidden % kFp8Block != 0) {
    checks_.refuse(
        fmt::format("x (shape {}) must be [tokens, hidden] with hidden a positive multiple of 128",
                    shape_text(a_.x)));
  }
  if (!checks_.tensor(a_.topk_idx, "topk_idx", {SHMOE_DTYPE_INT64}, {{tokens}, {}})) return;
  const std::int64_t topk = a_.topk_idx.shape[1];
  if (topk < 1 || topk > experts) {
    checks_.refuse(fmt::format("topk_idx (shape {}) must be [{}, top-k] with top-k in 1..{}",
                               shape_text(a_.topk_idx), tokens, experts));
    return;
  }
  const auto* idx = static_cast<const std::int64_t*>(a_.topk_idx.data);
  for (std::int64_t i = 0; i < tokens * topk; ++i) {
    if (idx[i] < -1 || idx[i] >= experts) {
      checks_.refuse(fmt::format("topk_idx[{}][{}]={} is out of range (0..{}, or -1 for none)",
                                 i / topk, i % topk, idx[i], experts - 1));
      return;
    }
  }
  s_ = {max_tokens, static_cast<int>(hidden), experts, static_cast<int>(topk)};
  tokens_ = static_cast<int>(tokens);
}

MoeBuffer& LowLatencyDispatch::send(LowLatencyAreas& areas) {
  const auto* idx = static_cast<const std::int64_t*>(a_.topk_idx.data);
  const auto k = static_cast<std::size_t>(s_.topk), given = static_cast<std::size_t>(call_topk_);
  routing_->topk_idx.assign(static_cast<std::size_t>(tokens_) * k, -1);  // shrink: padded
  for (std::size_t t = 0; t < static_cast<std::size_t>(tokens_); ++t) {
    for (std::size_t j = 0; j < given; ++j) {
      routing_->topk_idx[t * k + j] = static_cast<std::int32_t>(idx[t * given + j]);
    }
  }
  MoeBuffer* op = areas.bf16.get();
  const void* x = a_.x.data;
  if (a_.use_fp8 != 0) {
    if (!b_.shrink()) op = &areas.fp8();
    detail::checked(shmoe_fp8_quantize_token_rows(static_cast<const std::uint16_t*>(a_.x.data),
                                                  static_cast<std::size_t>(tokens_), s_.hidden,
                                                  a_.round_scale, areas.messages.data()));
    x = areas.messages.data();
    if (b_.shrink()) {  // the message rows at the head of BF16 rows, through the one operator
      const std::size_t bytes = areas.fp8_row_bytes(),
                        wide = static_cast<std::size_t>(s_.hidden) * 2;
      auto* rows = reinterpret_cast<std::uint8_t*>(areas.wide.data());
      for (std::size_t t = 0; t < static_cast<std::size_t>(tokens_); ++t) {
        std::memcpy(rows + t * wide, areas.messages.data() + t * bytes, bytes);
      }
      x = rows;
    }
  }
  const std::size_t cap = op->recv_capacity();
  LowLatencyRouting& r = *routing_;
  r.src_info.resize(cap * 3);
  r.layout_prefix.resize(static_cast<std::size_t>(areas.local_experts) * n_);
  r.counts.resize(static_cast<std::size_t>(areas.local_experts));
  DispatchArgs args;
  args.x = x;
  args.topk_idx = r.topk_idx.data();
  args.num_tokens = tokens_;
  args.pe_mask = b_.shrink() ? b_.mask() : nullptr;
  DispatchOutputs outs;
  // BF16 rows land in a free receive block, each expert's in its slab (the result: no copy).
  // Otherwise read where the rows landed; shrink mode copies them out compactly (the window
  // holds fixed slots there).
  Landing landing(areas.lender, op == areas.bf16.get() && a_.use_fp8 == 0);
  landing.aim(outs, b_.shrink() ? static_cast<void*>(areas.staged.data()) : op->receive_window());
  outs.recv_src_info = r.src_info.data();
  outs.recv_layout_prefix = r.layout_prefix.data();
  outs.num_recv_tokens_per_expert = r.counts.data();
  rows_ = op->dispatch(args, outs);
  if (rows_ == MoeBuffer::kRetry) {  // the operators hold every rank's rows: never expected
    throw std::logic_error(std::string(kCall) + ": the operator asked for a retry");
  }
  recv_ = outs.recv_x;
  lent_ = landing.lend(rows_, b_.counts());
  return *op;
}

shmoe_ep_result* LowLatencyDispatch::receive(LowLatencyAreas& areas) {
  const std::int64_t L = areas.local_experts, slots = areas.slots, hidden = s_.hidden;
  auto r = std::make_unique<shmoe_ep_result>();
  r->use(b_.memory());
  const bool fp8 = a_.use_fp8 != 0;
  const auto type = fp8 ? SHMOE_DTYPE_FLOAT8_E4M3 : SHMOE_DTYPE_BFLOAT16;
  auto* x = static_cast<std::uint8_t*>(
      lent_ ? r->add_over("recv_x", type, {L, slots, hidden}, lent_, lent_.get()).data
            : r->add("recv_x", type, {L, slots, hidden}).data);
  float* scales = nullptr;
  std::int32_t* packed = nullptr;
  std::vector<float> unpacked;
  if (fp8 && a_.use_ue8m0 != 0) {
    packed = static_cast<std::int32_t*>(
        r->add("recv_x_scales", SHMOE_DTYPE_INT32, {L, slots, (hidden + 511) / 512}).data);
  } else if (fp8) {
    scales = static_cast<float*>(
        r->add("recv_x_scales", SHMOE_DTYPE_FLOAT32, {L, slots, hidden / kFp8Block}).data);
  }
  if (!lent_) copy_rows(areas, x, scales, packed);
  auto* info = static_cast<std::int32_t*>(r->add("src_info", SHMOE_DTYPE_INT32, {L, slots}).data);
  std::fill(info, info + L * slots, -1);  // each row's source token, -1 past the count
  std::int64_t row = 0;
  for (std::int64_t e = 0; e < L; ++e) {
    const std::int32_t rows = routing_->counts[static_cast<std::size_t>(e)];
    for (std::int32_t j = 0; j < rows; ++j, ++row) {
      info[e * slots + j] = routing_->src_info[static_cast<std::size_t>(row) * 3 + 1];
    }
  }
  auto* count = static_cast<std::int32_t*>(r->add("recv_count", SHMOE_DTYPE_INT32, {L}).data);
  std::copy(routing_->counts.begin(), routing_->counts.end(), count);
  // Which rows of each expert came from which rank: (begin << 32) | count.
  auto* range = static_cast<std::int64_t*>(
      r->add("layout_range", SHMOE_DTYPE_INT64, {L, static_cast<std::int64_t>(n_)}).data);
  std::int64_t before = 0;
  for (std::int64_t e = 0; e < L; ++e) {
    std::int64_t begin = 0;
    for (int j = 0; j < n_; ++j) {
      const std::int64_t end = routing_->layout_prefix[static_cast<std::size_t>(e * n_ + j)];
      const std::int64_t rows = end - before;
      range[e * n_ + j] = (begin << 32) | rows;
      begin += rows;
      before = end;
    }
  }
  if (a_.cumulative_local_expert_recv_stats.data != nullptr) {
    auto* stats = static_cast<std::int32_t*>(a_.cumulative_local_expert_recv_stats.data);
    for (std::int64_t e = 0; e < L; ++e) stats[e] += count[e];
  }
  routing_->buffer = &b_;
  routing_->areas = &areas;
  routing_->tokens = tokens_;
  routing_->topk = s_.topk;
  routing_->call_topk = call_topk_;
  routing_->rows = rows_;
  r->state = routing_;
  return r.release();
}

// Each local expert's rows into its slab (FP8: split into codes and scales, or packed exponents),
// in receive order.
void LowLatencyDispatch::copy_rows(LowLatencyAreas& areas, std::uint8_t* x, float* scales,
                                   std::int32_t* packed) {
  const std::int64_t L = areas.local_experts, slots = areas.slots, hidden = s_.hidden;
  const std::int64_t blocks = hidden / kFp8Block, words = (hidden + 511) / 512;
  const bool fp8 = a_.use_fp8 != 0;
  const std::size_t value_bytes = static_cast<std::size_t>(hidden) * (fp8 ? 1 : 2);
  // FP8 message rows (shrink mode: at the head of BF16 rows), or BF16 rows.
  const std::size_t row_bytes =
      !fp8 ? value_bytes
           : (b_.shrink() ? static_cast<std::size_t>(hidden) * 2 : areas.fp8_row_bytes());
  const auto* recv = static_cast<const std::uint8_t*>(recv_);
  std::int64_t row = 0;
  for (std::int64_t e = 0; e < L; ++e) {
    const std::int64_t count = routing_->counts[static_cast<std::size_t>(e)];
    for (std::int64_t j = 0; j < count; ++j, ++row) {
      const std::int64_t slot = e * slots + j;
      const std::uint8_t* message = recv + static_cast<std::size_t>(row) * row_bytes;
      std::memcpy(x + static_cast<std::size_t>(slot) * value_bytes, message, value_bytes);
      const auto* s = reinterpret_cast<const float*>(message + value_bytes);
      if (scales != nullptr) std::memcpy(scales + slot * blocks, s, blocks * sizeof(float));
      if (packed != nullptr) {
        auto* bytes = reinterpret_cast<std::uint8_t*>(packed + slot * words);
        std::memset(bytes, 0, static_cast<std::size_t>(words) * 4);
        for (std::int64_t k = 0; k < blocks; ++k) {
          std::uint32_t bits = 0;
          std::memcpy(&bits, s + k, 4);
          bytes[k] = static_cast<std::uint8_t>(bits >> 23);
        }
      }
    }
  }
}

}  // namespace

shmoe_ep_result* LowLatencyBuffer::dispatch(const shmoe_low_latency_dispatch_args_t& args) {
  return LowLatencyDispatch(*this, args)();
}

}  // namespace shmoe::deep_ep
