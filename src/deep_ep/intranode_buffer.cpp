#include "deep_ep/intranode_buffer.hpp"

#include <fmt/format.h>
#include <shmem.h>

#include <algorithm>
#include <cstring>

#include "common/settings.hpp"
#include "deep_ep/checks.hpp"
#include "moe/moe.hpp"
#include "shmem/runtime.hpp"
#include "shmoe/runtime.hpp"

namespace shmoe::deep_ep {
namespace {

constexpr int kMinCapacity = 64;

int capacity_for(std::int64_t tokens, int first) {
  int capacity = std::max(first, kMinCapacity);
  while (capacity < tokens) capacity *= 2;
  return capacity;
}

}  // namespace

IntranodePlan::IntranodePlan(int n_ranks, int cap, const IntranodeShape& s, std::uint64_t e)
    : n(n_ranks),
      capacity(cap),
      units(s.units),
      experts(s.experts),
      topk(s.topk),
      side_width(2 * static_cast<int>(std::max<std::int64_t>(s.topk, 1))),
      epoch(e) {
  MoeConfig c = config(static_cast<int>(units), SHMOE_DTYPE_BFLOAT16, 4 * side_width,
                       static_cast<int>(kIntranodeHeader + experts));
  c.recv_blocks = blocks_that_fit(c, n, "deep_ep.Buffer.dispatch");
  x = std::make_unique<MoeBuffer>(c);
  lender = std::make_shared<BlockLender>(x.get(), c.recv_blocks);
  const auto rows = static_cast<std::size_t>(n) * static_cast<std::size_t>(capacity);
  ones.assign(rows, 1.0f);
  no_side.assign(static_cast<std::size_t>(capacity) * side_width, 0);
  no_ints.assign(kIntranodeHeader + static_cast<std::size_t>(experts), 0);
  side.assign(no_side.size(), 0);
  ints.assign(no_ints.size(), 0);
  recv_side.assign(rows * static_cast<std::size_t>(side_width), 0);
}

MoeConfig IntranodePlan::config(int hidden, shmoe_dtype_t dtype, int side_bytes,
                                int header_ints) const {
  MoeConfig c;
  c.num_experts_per_pe = 1;
  c.max_tokens_per_pe = capacity;
  c.hidden = hidden;
  c.num_topk = n;
  c.dtype = dtype;
  c.max_recv_rows = static_cast<std::size_t>(n) * static_cast<std::size_t>(capacity);
  c.token_side_bytes = side_bytes;
  c.header_ints = header_ints;
  return c;
}

MoeBuffer& IntranodePlan::combine_buffer(int hidden) {
  if (hidden == units) return *x;
  auto& b = wide_[hidden];
  if (!b) b = std::make_unique<MoeBuffer>(config(hidden, SHMOE_DTYPE_BFLOAT16, 0, 0));
  return *b;
}

MoeBuffer& IntranodePlan::weights_buffer(int width) {
  auto& b = weights_[width];
  if (!b) b = std::make_unique<MoeBuffer>(config(width, SHMOE_DTYPE_FLOAT32, 0, 0));
  return *b;
}

void IntranodePlan::abandon() {
  abandoned = true;
  lender->retire();
  for (auto* m : {&wide_, &weights_}) {
    for (auto& [width, b] : *m) (void)b->release();
  }
  if (x) (void)x->release();
}

void IntranodePlan::retire() {
  if (!abandoned) retire_blocks(*x, *lender);
}

IntranodeBuffer::IntranodeBuffer(const shmoe_intranode_buffer_config_t& config)
    : n_(shmem_n_pes()), me_(shmem_my_pe()), ranks_per_host_(host_layout(n_, me_)) {
  if (config.num_max_tokens_per_rank < 0) {
    throw moe::Refused(
        fmt::format("IntranodeBuffer: num_max_tokens_per_rank={} must be at least 0 (0: 64)",
                    config.num_max_tokens_per_rank));
  }
  if (config.num_max_tokens_per_rank > 0) first_capacity_ = config.num_max_tokens_per_rank;
}

IntranodeBuffer::~IntranodeBuffer() {
  if (plan_) plan_->retire();
}

void IntranodeBuffer::abandon() {
  if (plan_) plan_->abandon();
}

IntranodePlan& IntranodeBuffer::replan(const char* call, const std::string& refusal,
                                       const IntranodeShape& s) {
  agree(SHMEM_TEAM_WORLD, call, refusal,
        {{"x's row size (hidden x element bytes / 2)", s.units},
         {"num_experts", s.experts},
         {"num_topk", s.topk},
         {"SHMOE_DEEP_EP_RECV_BLOCKS", settings::deep_ep_recv_blocks()}});
  IntranodeShape want = s;
  want.tokens = most(s.tokens);
  IntranodePlan* p = plan_.get();
  if (p != nullptr && p->fits(want)) return *p;
  if (p != nullptr && want.units == p->units && want.experts == p->experts) {
    want.topk = std::max(want.topk, p->topk);
    want.tokens = std::max<std::int64_t>(want.tokens, p->capacity);
  }
  if (plan_) plan_->retire();
  plan_.reset();  // collective: every rank replans alike
  plan_ = std::make_unique<IntranodePlan>(n_, capacity_for(want.tokens, first_capacity_), want,
                                          ++epochs_);
  return *plan_;
}

const IntranodeRouting* IntranodeBuffer::current(const shmoe_ep_result* handle,
                                                 std::string* why) const {
  const auto* r = handle == nullptr || handle->cached
                      ? nullptr
                      : static_cast<const IntranodeRouting*>(handle->state.get());
  if (r == nullptr || r->buffer != this) {
    *why = "handle is not the handle a dispatch of this buffer returned";
    return nullptr;
  }
  if (plan_ == nullptr || r->epoch != plan_->epoch) {
    *why = "handle is stale: the buffer has grown or changed shape since that dispatch";
    return nullptr;
  }
  return r;
}

shmoe_ep_result* IntranodeBuffer::get_dispatch_layout(
    const shmoe_intranode_layout_args_t& a) const {
  Checks checks("deep_ep.Buffer.get_dispatch_layout");
  if (a.refusal != nullptr) checks.refuse(a.refusal);
  checks.range("num_experts", a.num_experts, 1);
  if (!checks.any() && a.num_experts % n_ != 0) {
    checks.refuse(
        fmt::format("num_experts={} is not divisible by the {} ranks", a.num_experts, n_));
  }
  checks.tensor(a.topk_idx, "topk_idx", {SHMOE_DTYPE_INT64}, {{}, {}});
  const std::int64_t tokens = checks.any() ? 0 : a.topk_idx.shape[0];
  const std::int64_t topk = checks.any() ? 0 : a.topk_idx.shape[1];
  const auto* idx = static_cast<const std::int64_t*>(a.topk_idx.data);
  for (std::int64_t i = 0; !checks.any() && i < tokens * topk; ++i) {
    if (idx[i] < -1 || idx[i] >= a.num_experts) {
      checks.refuse(fmt::format("topk_idx[{}][{}]={} is out of range (0..{}, or -1 for none)",
                                i / topk, i % topk, idx[i], a.num_experts - 1));
    }
  }
  if (checks.any()) throw moe::Refused(checks.why());
  auto r = std::make_unique<shmoe_ep_result>();
  auto* per_rank =
      static_cast<std::int32_t*>(r->add("num_tokens_per_rank", SHMOE_DTYPE_INT32, {n_}, true).data);
  auto* per_expert = static_cast<std::int32_t*>(
      r->add("num_tokens_per_expert", SHMOE_DTYPE_INT32, {a.num_experts}, true).data);
  auto* in_rank =
      static_cast<bool*>(r->add("is_token_in_rank", SHMOE_DTYPE_BOOL, {tokens, n_}, true).data);
  const int H = num_hosts(), L = n_ / H;
  std::int32_t* per_host = nullptr;
  if (H > 1) {
    per_host = static_cast<std::int32_t*>(
        r->add("num_tokens_per_rdma_rank", SHMOE_DTYPE_INT32, {H}, true).data);
  }
  const std::int64_t local = a.num_experts / n_;
  for (std::int64_t t = 0; t < tokens; ++t) {
    bool* row = in_rank + t * n_;
    for (std::int64_t k = 0; k < topk; ++k) {
      const std::int64_t e = idx[t * topk + k];
      if (e < 0) continue;
      ++per_expert[e];
      row[e / local] = true;
    }
    for (int j = 0; j < n_; ++j) per_rank[j] += row[j] ? 1 : 0;
    for (int h = 0; per_host != nullptr && h < H; ++h) {
      per_host[h] += std::any_of(row + h * L, row + (h + 1) * L, [](bool b) { return b; }) ? 1 : 0;
    }
  }
  return r.release();
}

}  // namespace shmoe::deep_ep
