// ElasticBuffer::combine as a call object: each phase a method, the barriers in operator().
// Rank j writes, for each token it received from rank i, its bf16 partial into i's window at
// row (token, slot) with slot j's largest top-k slot of the token (or, expanded rows without
// multiple reduction, each row at its own slot) and each slot's weight beside; rank i then sums
// the rows of each token in slot order from its biases, as DeepEP's combine does, so the sum is
// the same bits whichever rank wrote first.
#include <fmt/format.h>
#include <shmem.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "deep_ep/checks.hpp"
#include "deep_ep/elastic_buffer.hpp"
#include "numeric/half.hpp"
#include "shmoe/runtime.hpp"

namespace shmoe::deep_ep {
namespace {

constexpr const char* kCall = "ElasticBuffer.combine";

using numeric::bf16;
using numeric::bf16_to_float;
using numeric::float_to_bf16;

class CombineCall {
 public:
  CombineCall(ElasticBuffer& b, const shmoe_elastic_combine_args_t& a)
      : b_(b), a_(a), checks_(kCall), result_(std::make_unique<shmoe_ep_result>()) {
    result_->use(b.memory());
  }

  shmoe_ep_result* operator()() {
    check();
    agree(SHMEM_TEAM_WORLD, kCall, checks_.why(),
          {{"hidden", hidden_},
           {"whether topk_weights is given", with_weights_},
           {"the handle's do_expand", expand_},
           {"the handle's num_topk", topk_},
           {"the handle's num_experts", experts_},
           {"the handle's num_max_tokens_per_rank", max_tokens_}});
    b_.require_fits(kCall, static_cast<std::uint64_t>(max_tokens_ * topk_ * (2 * hidden_ + 4)),
                    "num_max_tokens_per_rank x num_topk x (a bf16 row and a weight)");
    send();
    shmem_barrier_all();
    reduce();
    return result_.release();
  }

 private:
  void check();
  void send();
  void send_row(int rank, std::int64_t token, std::int64_t slot, const bf16* row);
  void reduce();
  void add_partials(std::int64_t t, float* acc) const;

  // acc[h] += row[h] in fp32 over the hidden elements (0 + b is b: starting from 0 is exact).
  void add_row(float* __restrict acc, const bf16* __restrict row) const {
    for (std::int64_t h = 0; h < hidden_; ++h) acc[h] += bf16_to_float(row[h]);
  }
  // Where (token, slot)'s row and weight live in a window.
  std::int64_t row_offset(std::int64_t t, std::int64_t k) const {
    return (t * topk_ + k) * 2 * hidden_;
  }
  std::int64_t weight_offset(std::int64_t t, std::int64_t k) const {
    return max_tokens_ * topk_ * 2 * hidden_ + (t * topk_ + k) * 4;
  }
  // Whether a rank reduces its rows of a token to one partial before sending it.
  bool one_partial_per_rank() const {
    return !expand_ || b_.config().allow_multiple_reduction != 0;
  }

  ElasticBuffer& b_;
  const shmoe_elastic_combine_args_t& a_;
  Checks checks_;
  std::unique_ptr<shmoe_ep_result> result_;
  const Routing* r_ = nullptr;
  std::int64_t hidden_ = 0, topk_ = 0, experts_ = 0, max_tokens_ = 0, tokens_ = 0;
  bool expand_ = false, with_weights_ = false;
  std::vector<std::vector<bf16>> staged_;  // partials put to unmapped windows
  std::vector<std::byte*> mapped_;         // each rank's window, where this PE maps it
};

void CombineCall::check() {
  if (a_.refusal != nullptr) checks_.refuse(a_.refusal);
  const Result* h = a_.handle;
  if (h == nullptr || h->routing == nullptr || h->cached) {
    return checks_.refuse("handle must be the handle a (non-cached) dispatch returned");
  }
  if (h->routing->buffer != &b_ || h->routing->epoch != b_.id()) {
    return checks_.refuse("handle comes from another ElasticBuffer");
  }
  r_ = h->routing.get();
  expand_ = r_->do_expand;
  topk_ = r_->num_topk;
  experts_ = r_->num_experts;
  max_tokens_ = r_->num_max_tokens_per_rank;
  tokens_ = r_->num_tokens;
  const std::int64_t rows = expand_ ? r_->num_expanded_tokens : r_->num_recv_tokens;
  if (checks_.tensor(a_.x, "x", {SHMOE_DTYPE_BFLOAT16}, {{rows, true}, {}})) {
    hidden_ = a_.x.shape[1];
  }
  with_weights_ = checks_.given(a_.topk_weights);
  if (with_weights_ && expand_) {
    checks_.tensor(a_.topk_weights, "topk_weights", {SHMOE_DTYPE_FLOAT32}, {{rows, true}});
  } else if (with_weights_) {
    checks_.tensor(a_.topk_weights, "topk_weights", {SHMOE_DTYPE_FLOAT32}, {{rows, true}, {topk_}});
  }
  if (checks_.given(a_.bias0)) {
    checks_.tensor(a_.bias0, "bias[0]", {SHMOE_DTYPE_BFLOAT16}, {{tokens_}, {hidden_}});
  }
  if (checks_.given(a_.bias1)) {
    checks_.tensor(a_.bias1, "bias[1]", {SHMOE_DTYPE_BFLOAT16}, {{tokens_}, {hidden_}});
  }
}

// Writes `row` (hidden bf16) into rank's window at (token, slot).
void CombineCall::send_row(int rank, std::int64_t token, std::int64_t slot, const bf16* row) {
  std::byte* mapped = mapped_[static_cast<std::size_t>(rank)];
  const auto bytes = static_cast<std::size_t>(2 * hidden_);
  if (mapped != nullptr) {
    std::memcpy(mapped + row_offset(token, slot), row, bytes);
  } else {
    staged_.emplace_back(row, row + hidden_);  // the put reads it after this returns
    shmem_putmem_nbi(b_.window() + row_offset(token, slot), staged_.back().data(), bytes, rank);
  }
}

void CombineCall::send() {
  const auto* x = static_cast<const bf16*>(a_.x.data);
  const auto* w = static_cast<const float*>(a_.topk_weights.data);
  const std::int64_t K = topk_;
  for (int j = 0; j < b_.num_ranks(); ++j) {
    mapped_.push_back(static_cast<std::byte*>(shmem_ptr(b_.window(), j)));
  }
  staged_.reserve(r_->src_rank.size() * static_cast<std::size_t>(K));
  std::vector<float> acc(static_cast<std::size_t>(hidden_));
  std::vector<bf16> partial(static_cast<std::size_t>(hidden_));
  for (std::size_t q = 0; q < r_->src_rank.size(); ++q) {
    const int i = r_->src_rank[q];
    const std::int64_t t = r_->src_token[q];
    const std::int32_t* local = r_->local_expert.data() + q * static_cast<std::size_t>(K);
    const std::int32_t* pos = r_->expanded_row.data() + q * static_cast<std::size_t>(K);
    std::int64_t last = -1;  // this rank's largest top-k slot of the token
    std::fill(acc.begin(), acc.end(), 0.0F);
    for (std::int64_t k = 0; k < K; ++k) {
      if (local[k] < 0) continue;
      last = k;
      const std::int64_t row = expand_ ? pos[k] : static_cast<std::int64_t>(q);
      if (w != nullptr) {
        const float wv = expand_ ? w[row] : w[row * K + k];
        if (mapped_[static_cast<std::size_t>(i)] != nullptr) {
          std::memcpy(mapped_[static_cast<std::size_t>(i)] + weight_offset(t, k), &wv, 4);
        } else {
          shmem_float_p(reinterpret_cast<float*>(b_.window() + weight_offset(t, k)), wv, i);
        }
      }
      if (!expand_) continue;
      const bf16* xr = x + row * hidden_;
      if (!one_partial_per_rank()) {
        send_row(i, t, k, xr);
        continue;
      }
      add_row(acc.data(), xr);
    }
    if (last < 0 || !one_partial_per_rank()) continue;
    if (!expand_) {
      send_row(i, t, last, x + static_cast<std::int64_t>(q) * hidden_);
      continue;
    }
    numeric::floats_to_bf16(acc.data(), acc.size(),
                            reinterpret_cast<std::uint16_t*>(partial.data()));
    send_row(i, t, last, partial.data());
  }
}

// Adds token t's partials to acc in slot order: each rank's (or, without one partial per rank,
// each row's) at its slot, or in hybrid mode each host's, their sum rounded to bf16, at the
// host's largest slot.
void CombineCall::add_partials(std::int64_t t, float* acc) const {
  const std::int32_t* ids = r_->topk_idx.data() + t * topk_;
  const std::int64_t local = experts_ / b_.num_ranks();
  const bool hybrid = b_.hybrid() && b_.config().allow_multiple_reduction != 0;
  const std::int64_t group = hybrid ? local * b_.ranks_per_host() : local;
  auto holds = [&](std::int64_t k) {  // whether (t, k) holds a row
    if (ids[k] < 0) return false;
    if (!one_partial_per_rank()) return true;
    for (std::int64_t l = k + 1; l < topk_; ++l) {
      if (ids[l] >= 0 && ids[l] / local == ids[k] / local) return false;
    }
    return true;
  };
  auto row = [&](std::int64_t k) {
    return reinterpret_cast<const bf16*>(b_.window() + row_offset(t, k));
  };
  std::vector<float> host(hybrid ? static_cast<std::size_t>(hidden_) : 0);
  for (std::int64_t k = 0; k < topk_; ++k) {
    if (!holds(k)) continue;
    if (!hybrid) {
      add_row(acc, row(k));
      continue;
    }
    // Hybrid: at the host's largest holding slot, the host's partial.
    bool largest = true;
    for (std::int64_t l = k + 1; l < topk_ && largest; ++l) {
      largest = !(holds(l) && ids[l] / group == ids[k] / group);
    }
    if (!largest) continue;
    std::fill(host.begin(), host.end(), 0.0F);
    for (std::int64_t l = 0; l <= k; ++l) {
      if (!holds(l) || ids[l] / group != ids[k] / group) continue;
      add_row(host.data(), row(l));
    }
    for (std::int64_t h = 0; h < hidden_; ++h) {
      acc[h] += bf16_to_float(float_to_bf16(host[static_cast<std::size_t>(h)]));
    }
  }
}

void CombineCall::reduce() {
  auto* out =
      static_cast<bf16*>(result_->add("combined_x", SHMOE_DTYPE_BFLOAT16, {tokens_, hidden_}).data);
  const auto* b0 = static_cast<const bf16*>(a_.bias0.data);
  const auto* b1 = static_cast<const bf16*>(a_.bias1.data);
  if (b0 == nullptr) std::swap(b0, b1);
  std::vector<float> acc(static_cast<std::size_t>(hidden_));
  for (std::int64_t t = 0; t < tokens_; ++t) {
    std::fill(acc.begin(), acc.end(), 0.0F);
    if (b0 != nullptr) {
      add_row(acc.data(), b0 + t * hidden_);
      if (b1 != nullptr) add_row(acc.data(), b1 + t * hidden_);  // bias0 + bias1 in fp32
    }
    add_partials(t, acc.data());
    numeric::floats_to_bf16(acc.data(), static_cast<std::size_t>(hidden_),
                            reinterpret_cast<std::uint16_t*>(out + t * hidden_));
  }
  if (!with_weights_) return;
  auto* w = static_cast<float*>(
      result_->add("combined_topk_weights", SHMOE_DTYPE_FLOAT32, {tokens_, topk_}).data);
  for (std::int64_t t = 0; t < tokens_; ++t) {
    for (std::int64_t k = 0; k < topk_; ++k) {
      float v = 0.0F;
      if (r_->topk_idx[static_cast<std::size_t>(t * topk_ + k)] >= 0) {
        std::memcpy(&v, b_.window() + weight_offset(t, k), 4);
      }
      w[t * topk_ + k] = v;
    }
  }
}

}  // namespace

shmoe_ep_result* ElasticBuffer::combine(const shmoe_elastic_combine_args_t& args) {
  return CombineCall(*this, args)();
}

}  // namespace shmoe::deep_ep
