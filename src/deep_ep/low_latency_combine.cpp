// LowLatencyBuffer::combine as a call object: check, agree, stage the experts' rows in the BF16
// receive window in dispatch's order (when every rank does so, each rank's reduction reads them
// where they lie), reduce.
#include <fmt/format.h>
#include <shmem.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "deep_ep/checks.hpp"
#include "deep_ep/low_latency_buffer.hpp"
#include "moe/moe.hpp"
#include "shmoe/runtime.hpp"

namespace shmoe::deep_ep {
namespace {

constexpr const char* kCall = "deep_ep.Buffer.low_latency_combine";

class LowLatencyCombine {
 public:
  LowLatencyCombine(LowLatencyBuffer& b, const shmoe_low_latency_combine_args_t& a)
      : b_(b), a_(a), n_(b.num_ranks()) {}

  shmoe_ep_result* operator()() {
    check();
    if (!b_.shrink()) {
      agree(SHMEM_TEAM_WORLD, kCall, checks_.why());
    } else if (checks_.any()) {  // each rank checks its own; the others mask a rank that raises
      throw moe::Refused(checks_.why());
    }
    LowLatencyAreas& areas = *h_->areas;
    auto r = std::make_unique<shmoe_ep_result>();
    r->use(b_.memory());
    void* out = a_.out.data;
    if (out == nullptr) {
      out = r->add("combined_x", SHMOE_DTYPE_BFLOAT16,
                   {static_cast<std::int64_t>(h_->tokens), areas.shape.hidden})
                .data;
    }
    reduce(areas, out);
    if (a_.combine_wait_recv_cost_stats.data != nullptr) {
      areas.bf16->last_source_waits(areas.waits);
      auto* ns = static_cast<std::int64_t*>(a_.combine_wait_recv_cost_stats.data);
      for (std::size_t j = 0; j < areas.waits.size(); ++j) {
        ns[j] += std::llround(areas.waits[j] * 1000.0);
      }
    }
    return r.release();
  }

 private:
  void check();
  void reduce(LowLatencyAreas& areas, void* out);

  LowLatencyBuffer& b_;
  const shmoe_low_latency_combine_args_t& a_;
  const int n_;
  Checks checks_{kCall};
  const LowLatencyRouting* h_ = nullptr;
  shmoe_tensor_t x_{};
};

void LowLatencyCombine::check() {
  if (a_.refusal != nullptr) checks_.refuse(a_.refusal);
  h_ = b_.routing(a_.handle);
  if (h_ == nullptr) {
    checks_.refuse("handle must be the handle a low_latency_dispatch of this buffer returned");
    return;
  }
  const LowLatencyAreas& a = *h_->areas;
  const std::int64_t tokens = h_->tokens, topk = h_->call_topk;
  x_ = a_.x;
  if (a_.zero_copy != 0) {
    if (!a.combine_input) {
      checks_.refuse("zero_copy=True, but get_next_low_latency_combine_buffer was not called");
      return;
    }
    x_ = b_.next_combine_buffer(a_.handle);
  }
  checks_.tensor(x_, "x", {SHMOE_DTYPE_BFLOAT16}, {{a.local_experts}, {a.slots}, {a.shape.hidden}});
  checks_.tensor(a_.topk_idx, "topk_idx", {SHMOE_DTYPE_INT64}, {{tokens}, {topk}});
  checks_.tensor(a_.topk_weights, "topk_weights", {SHMOE_DTYPE_FLOAT32}, {{tokens}, {topk}});
  if (a_.out.data != nullptr) {
    checks_.tensor(a_.out, "out", {SHMOE_DTYPE_BFLOAT16}, {{tokens}, {a.shape.hidden}});
  }
  if (a_.combine_wait_recv_cost_stats.data != nullptr) {
    checks_.tensor(a_.combine_wait_recv_cost_stats, "combine_wait_recv_cost_stats",
                   {SHMOE_DTYPE_INT64}, {{n_}});
  }
}

void LowLatencyCombine::reduce(LowLatencyAreas& areas, void* out) {
  const std::size_t row_bytes = static_cast<std::size_t>(areas.shape.hidden) * 2;
  // The rows in dispatch's layout: in the receive window (when every rank does so, each rank's
  // reduction reads them where they lie), or in shrink mode in the areas' own rows (the window
  // holds fixed slots there).
  auto* window = b_.shrink() ? reinterpret_cast<std::uint8_t*>(areas.staged.data())
                             : static_cast<std::uint8_t*>(areas.bf16->receive_window());
  const auto* ys = static_cast<const std::uint8_t*>(x_.data);
  std::size_t row = 0;
  for (std::size_t e = 0; e < h_->counts.size(); ++e) {
    const auto count = static_cast<std::size_t>(h_->counts[e]);
    const std::uint8_t* slab = ys + e * static_cast<std::size_t>(areas.slots) * row_bytes;
    std::memcpy(window + row * row_bytes, slab, count * row_bytes);
    row += count;
  }
  CombineArgs args;
  args.x = window;
  args.src_info = h_->src_info.data();
  args.layout_prefix = h_->layout_prefix.data();
  args.topk_idx = h_->topk_idx.data();
  args.topk_weights = static_cast<const float*>(a_.topk_weights.data);
  std::vector<float> padded;  // shrink mode: zeros where the routing was padded with -1
  if (h_->topk != h_->call_topk) {
    const auto k = static_cast<std::size_t>(h_->topk),
               given = static_cast<std::size_t>(h_->call_topk);
    padded.assign(static_cast<std::size_t>(h_->tokens) * k, 0.0f);
    for (std::size_t t = 0; t < static_cast<std::size_t>(h_->tokens); ++t) {
      std::copy_n(args.topk_weights + t * given, given,
                  padded.begin() + static_cast<std::ptrdiff_t>(t * k));
    }
    args.topk_weights = padded.data();
  }
  args.pe_mask = b_.shrink() ? b_.mask() : nullptr;
  args.num_tokens = h_->tokens;
  args.combined_x = out;
  areas.bf16->combine(args);
}

}  // namespace

shmoe_ep_result* LowLatencyBuffer::combine(const shmoe_low_latency_combine_args_t& args) {
  return LowLatencyCombine(*this, args)();
}

}  // namespace shmoe::deep_ep
