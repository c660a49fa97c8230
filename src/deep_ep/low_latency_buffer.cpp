#include "deep_ep/low_latency_buffer.hpp"

#include <fmt/format.h>
#include <shmem.h>

#include <algorithm>

#include "deep_ep/checks.hpp"
#include "moe/moe.hpp"
#include "shmoe/runtime.hpp"

namespace shmoe::deep_ep {

LowLatencyAreas::LowLatencyAreas(const LowLatencyShape& s, int n_ranks, int ms)
    : shape(s),
      n(n_ranks),
      local_experts(s.experts / n_ranks),
      slots(s.max_tokens * n_ranks),
      shrink_ms(ms),
      fp8_row_bytes_(shmoe_fp8_token_row_bytes(s.hidden)) {
  MoeConfig c = config(s.hidden, SHMOE_DTYPE_BFLOAT16);
  if (shrink_ms == 0) {  // shrink mode's rows stay in fixed slots
    c.recv_block_expert_rows = slots;
    c.recv_blocks = blocks_that_fit(c, n, "deep_ep.Buffer.low_latency_dispatch");
  }
  bf16 = std::make_unique<MoeBuffer>(c);
  lender = std::make_shared<BlockLender>(bf16.get(), c.recv_blocks);
  if (shrink_ms > 0) {
    const auto h = static_cast<std::size_t>(s.hidden);
    wide.assign(static_cast<std::size_t>(s.max_tokens) * h, 0);
    staged.assign(bf16->recv_capacity() * h, 0);
    messages.assign(static_cast<std::size_t>(s.max_tokens) * fp8_row_bytes_, 0);
  }
}

MoeConfig LowLatencyAreas::config(int hidden, shmoe_dtype_t dtype) const {
  MoeConfig c;
  c.num_experts_per_pe = local_experts;
  c.max_tokens_per_pe = shape.max_tokens;
  c.hidden = hidden;
  c.num_topk = shape.topk;
  c.dtype = dtype;
  if (shrink_ms > 0) {  // a fixed slot per (local expert, source, token): no row limit
    c.shrink_timeout_ms = shrink_ms;
    return c;
  }
  // A local expert gets at most one row per token of each rank.
  c.max_recv_rows = static_cast<std::size_t>(std::min(local_experts, shape.topk)) *
                    static_cast<std::size_t>(slots);
  return c;
}

MoeBuffer& LowLatencyAreas::fp8() {
  if (!fp8_) {
    fp8_ = std::make_unique<MoeBuffer>(
        config(static_cast<int>(fp8_row_bytes_ / 4), SHMOE_DTYPE_INT32));
    messages.assign(static_cast<std::size_t>(shape.max_tokens) * fp8_row_bytes_, 0);
  }
  return *fp8_;
}

LowLatencyAreas::~LowLatencyAreas() {
  lender->retire();
}  // before bf16 goes, retired or not

void LowLatencyAreas::retire() {
  if (!abandoned_) retire_blocks(*bf16, *lender);
}

void LowLatencyAreas::abandon() {
  abandoned_ = true;
  lender->retire();
  if (fp8_) (void)fp8_->release();
  if (bf16) (void)bf16->release();
}

LowLatencyBuffer::LowLatencyBuffer(const shmoe_low_latency_buffer_config_t& config)
    : n_(shmem_n_pes()), me_(shmem_my_pe()) {
  if (config.reserved != 0) {
    throw moe::Refused(fmt::format("LowLatencyBuffer: reserved={} must be 0", config.reserved));
  }
  if (config.shrink_timeout_ms != 0) start_shrink(config);
}

LowLatencyBuffer::~LowLatencyBuffer() {
  if (abandoned_) return;
  for (auto& [shape, a] : areas_) a->retire();  // the same shapes, in the same order, everywhere
}

void LowLatencyBuffer::abandon() {
  abandoned_ = true;
  for (auto& [shape, a] : areas_) a->abandon();
  if (sync_) (void)sync_->release();
}

LowLatencyAreas& LowLatencyBuffer::areas(const LowLatencyShape& s, const char* call) {
  auto found = areas_.find(s);
  if (found != areas_.end()) return *found->second;
  if (shrink() && any_masked()) {
    std::string masked;
    for (int j = 0; j < n_; ++j) {
      if (mask_[static_cast<std::size_t>(j)] != 0) {
        masked += (masked.empty() ? "" : ", ") + std::to_string(j);
      }
    }
    throw moe::Refused(fmt::format(
        "{}: shrink mode: the operators of num_max_dispatch_tokens_per_rank={}, hidden={}, "
        "num_experts={}, num_topk={} do not exist, and are made with every rank, but ranks [{}] "
        "are masked: ask get_low_latency_rdma_size_hint about the shape before making the "
        "Buffer, or use it first while every rank is live",
        call, s.max_tokens, s.hidden, s.experts, s.topk, masked));
  }
  auto& a = areas_[s];
  a = std::make_unique<LowLatencyAreas>(s, n_, shrink_ms_);
  return *a;
}

const LowLatencyRouting* LowLatencyBuffer::routing(const shmoe_ep_result* handle) const {
  const auto* r =
      handle == nullptr ? nullptr : static_cast<const LowLatencyRouting*>(handle->state.get());
  return r != nullptr && r->buffer == this ? r : nullptr;
}

shmoe_tensor_t LowLatencyBuffer::next_combine_buffer(const shmoe_ep_result* handle) {
  const LowLatencyRouting* r = routing(handle);
  if (r == nullptr) {
    throw moe::Refused(
        "deep_ep.Buffer.get_next_low_latency_combine_buffer: handle must be the handle a "
        "low_latency_dispatch of this buffer returned");
  }
  LowLatencyAreas& a = *r->areas;
  const std::int64_t L = a.local_experts, slots = a.slots, hidden = a.shape.hidden;
  if (!a.combine_input) {
    a.combine_input = memory_->take(static_cast<std::size_t>(L * slots * hidden * 2));
  }
  shmoe_tensor_t t{};
  t.data = a.combine_input.get();
  t.dtype = SHMOE_DTYPE_BFLOAT16;
  t.ndim = 3;
  t.shape[0] = L;
  t.shape[1] = slots;
  t.shape[2] = hidden;
  t.strides[0] = slots * hidden;
  t.strides[1] = hidden;
  t.strides[2] = 1;
  return t;
}

void LowLatencyBuffer::clean(int max_tokens, int hidden, int experts, const char* refusal) {
  Checks checks("deep_ep.Buffer.clean_low_latency_buffer");
  if (shrink()) {  // each rank checks its own, then a barrier of the live ranks (or a rejoin)
    if (refusal != nullptr) checks.refuse(refusal);
    checks.range("num_max_dispatch_tokens_per_rank", max_tokens, 1);
    checks.range("hidden", hidden, 1);
    checks.range("num_experts", experts, 1);
    if (!checks.any() && experts % n_ != 0) {
      checks.refuse(fmt::format("num_experts={} is not divisible by the {} ranks", experts, n_));
    }
    if (checks.any()) throw moe::Refused(checks.why());
    barrier();
    return;
  }
  if (refusal != nullptr) checks.refuse(refusal);
  checks.range("num_max_dispatch_tokens_per_rank", max_tokens, 1);
  checks.range("hidden", hidden, 1);
  checks.range("num_experts", experts, 1);
  if (!checks.any() && experts % n_ != 0) {
    checks.refuse(fmt::format("num_experts={} is not divisible by the {} ranks", experts, n_));
  }
  agree(SHMEM_TEAM_WORLD, "deep_ep.Buffer.clean_low_latency_buffer", checks.why(),
        {{"num_max_dispatch_tokens_per_rank", max_tokens},
         {"hidden", hidden},
         {"num_experts", experts}});
}

}  // namespace shmoe::deep_ep
