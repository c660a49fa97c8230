#include "moe/protocol.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <shmem.h>

#include <algorithm>
#include <atomic>
#include <chrono>

#include "common/backoff.hpp"
#include "common/log.hpp"
#include "common/pe_loss.hpp"
#include "moe/remote_words.hpp"
#include "moe/test_stop.hpp"

namespace shmoe::moe {
namespace {

using Clock = std::chrono::steady_clock;

// The live sources a wait has not seen yet, and when each is due (shrink mode's bound, or one
// more for a source held in a wait of its own).
class PendingSources {
 public:
  PendingSources(int n, const LiveSet& live)
      : live_(live),
        pending_(static_cast<std::size_t>(n)),
        due_(static_cast<std::size_t>(n), Clock::now() + live.bound()),
        extended_(static_cast<std::size_t>(n), false) {
    for (int src = 0; src < n; ++src) {
      pending_[static_cast<std::size_t>(src)].store(live.live(src), std::memory_order_relaxed);
      left_ += live.live(src);
    }
  }
  // Atomic: a hang report (another thread) reads it through describe while this thread waits.
  bool pending(int src) const {
    return pending_[static_cast<std::size_t>(src)].load(std::memory_order_relaxed);
  }
  void arrived(int src) {
    pending_[static_cast<std::size_t>(src)].store(false, std::memory_order_relaxed);
    --left_;
  }
  int left() const { return left_; }
  bool past_due(int src) const {
    return live_.bounded() && Clock::now() >= due_[static_cast<std::size_t>(src)];
  }
  // Past the bound: a source held up in a wait of its own gets one more bound, once; the others
  // are masked now (and the live PEs told), while the wait goes on for the rest.
  void settle_past_due(const std::string& step, std::uint64_t g) {
    for (int src = 0; src < static_cast<int>(pending_.size()) && left_ > 0; ++src) {
      const auto s = static_cast<std::size_t>(src);
      if (!pending(src) || !past_due(src)) continue;
      if (!extended_[s] && live_.held_in_a_wait(src)) {
        extended_[s] = true;
        due_[s] = Clock::now() + live_.bound();
        continue;
      }
      arrived(src);
      live_.mask(src, step, g, "");
    }
  }

 private:
  const LiveSet& live_;
  std::vector<std::atomic<bool>> pending_;
  std::vector<Clock::time_point> due_;
  std::vector<bool> extended_;
  int left_ = 0;
};

// Waits until ready(src) holds for every live source PE, polling all of them in each round so
// that each arrival is timed on its own (into `waits`, when given). A hang names the first source
// still missing, by describe(src). In shrink mode the wait ends at the bound, and the sources
// still missing are masked (as having missed `step` of call `g`), but for one held in a wait of
// its own, which gets one more bound (LiveSet::held_in_a_wait); at once a source for which
// ended_without_me(src) holds, or that a live PE masked.
template <typename Ready, typename Describe, typename Left>
void wait_for_sources(int n, Ready&& ready, Describe&& describe, SourceWaits* waits,
                      const LiveSet& live, const std::string& step, std::uint64_t g,
                      Left&& ended_without_me) {
  PendingSources sources(n, live);
  const auto t0 = Clock::now();
  // Shrink mode masks a PE that does not come, lost ones included (SHMOE_PE_LOSS=continue): its
  // waits must not fail on them as other waits do.
  const shmoe::LostPesHandledHere lost_pes_masked_here(live.bounded());
  // Why a source is masked before the bound: it was lost, or it left without this PE.
  std::vector<const char*> gone(static_cast<std::size_t>(n), nullptr);
  while (sources.left() > 0) {
    bool out_of_time = false;
    shmoe::wait_until(
        [&] {
          live.beat();
          for (int src = 0; src < n; ++src) {
            if (!sources.pending(src)) continue;
            const char* why = !live.bounded()              ? nullptr
                              : shmoe::pe_lost(src)        ? "it was lost (SHMOE_PE_LOSS=continue)"
                              : ended_without_me(src)      ? "it ended this step without this PE"
                              : live.masked_elsewhere(src) ? "a live PE masked it"
                                                           : nullptr;
            if (why != nullptr) {
              // It never comes: masked at once rather than at the bound.
              sources.arrived(src);
              gone[static_cast<std::size_t>(src)] = why;
              continue;
            }
            if (!ready(src)) {
              out_of_time = out_of_time || sources.past_due(src);
              continue;
            }
            sources.arrived(src);
            if (waits != nullptr) {
              waits->add(src, std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
            }
          }
          return sources.left() == 0 || out_of_time;
        },
        [&] {
          int src = 0;
          while (src + 1 < n && !sources.pending(src)) ++src;
          return describe(src);
        });
    sources.settle_past_due(step, g);
  }
  for (int src = 0; src < n; ++src) {
    if (gone[static_cast<std::size_t>(src)] != nullptr)
      live.mask(src, step, g, gone[static_cast<std::size_t>(src)]);
  }
}

}  // namespace

void LiveSet::mask(int pe, const std::string& step, std::uint64_t g, const std::string& why) const {
  mask_[pe] = 1;
  for (int q = 0; words_ != nullptr && q < words_->masked.size(); ++q) {
    if (q != words_->me && live(q)) words_->masked.raise(q, pe, words_->epoch + 1);
  }
  if (!why.empty()) {
    log::warn("shrink mode: PE {} masked at {} of call {}: {}", pe, step, g, why);
  } else {
    log::warn("shrink mode: PE {} masked: it did not reach {} of call {} within {} ms", pe, step, g,
              bound_.count());
  }
}

void LiveSet::beat() const {
  if (words_ == nullptr) return;
  std::atomic_ref<std::uint64_t> b(*words_->beat);
  b.store(b.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

bool LiveSet::masked_elsewhere(int pe) const {
  return words_ != nullptr &&
         std::atomic_ref<std::uint64_t>(*words_->masked.slot(pe)).load(std::memory_order_acquire) ==
             words_->epoch + 1;
}

namespace {

// Keeps this PE's beat moving until `until`.
void beat_until(const LiveSet& live, Clock::time_point until) {
  shmoe::wait_until(
      [&] {
        live.beat();
        return Clock::now() >= until;
      },
      [] { return shmoe::WaitState{"shrink mode", "a peer's beat", -1, 0, 0, 0}; });
}

// PE `pe`'s beat (false: a get of it unanswered or failed).
bool read_beat(const LiveSet& live, std::uint64_t* beat, int pe, std::uint64_t& out) {
  std::vector<bool> want(static_cast<std::size_t>(pe) + 1, false);
  want[static_cast<std::size_t>(pe)] = true;
  const auto read = read_remote_words(live, beat, want, "a peer's beat");
  if (!read[static_cast<std::size_t>(pe)]) return false;
  out = *read[static_cast<std::size_t>(pe)];
  return true;
}

}  // namespace

bool LiveSet::held_in_a_wait(int pe) const {
  if (words_ == nullptr) return false;
  std::uint64_t first = 0, second = 0;
  if (!read_beat(*this, words_->beat, pe, first)) return false;
  beat_until(*this, Clock::now() + bound_ / 16);
  return read_beat(*this, words_->beat, pe, second) && second != first;
}

void FlagArray::raise(int pe, int src, std::uint64_t generation) const {
  shmem_uint64_atomic_set(slot(src), generation, pe);
}

void FlagArray::raise_after(int pe, int src, std::uint64_t generation, void* dest, const void* data,
                            std::size_t bytes) const {
  shmem_putmem_signal(dest, data, bytes, slot(src), generation, SHMEM_SIGNAL_SET, pe);
}

void FlagArray::raise_held_at_every_pe(int me, std::uint64_t generation,
                                       const LiveSet& live) const {
  for (int pe = 0; pe < n_; ++pe) {
    if (live.live(pe)) raise_after(pe, me, generation);
  }
}

void FlagArray::raise_at_every_pe(int me, std::uint64_t generation, const LiveSet& live) const {
  for (int pe = 0; pe < n_; ++pe) {
    if (live.live(pe)) raise(pe, me, generation);
  }
}

void FlagArray::wait_for_every_pe(std::uint64_t generation, const std::string& what,
                                  SourceWaits* waits, const LiveSet& live) const {
  wait_for_sources(
      n_,
      [&](int src) {
        return std::atomic_ref<std::uint64_t>(*slot(src)).load(std::memory_order_acquire) >=
               generation;
      },
      [&](int src) {
        const std::uint64_t seen = std::atomic_ref<std::uint64_t>(*slot(src)).load();
        return shmoe::WaitState{
            what,
            fmt::format("{} #{}: waiting for PE {} (its flag is at generation {})", what,
                        generation, src, seen),
            src,
            generation,
            seen,
            generation};
      },
      waits, live, what, generation, [](int) { return false; });
}

void FlagArray::meet(int me, std::uint64_t attempt, const std::string& what, const LiveSet& live,
                     void* row, std::size_t bytes) const {
  auto raise_flag = [&](int pe, std::uint64_t value) {
    if (row == nullptr) {
      raise(pe, me, value);
    } else {
      raise_after(pe, me, value, row, row, pe == me ? 0 : bytes);
    }
  };
  std::vector<bool> was_live(static_cast<std::size_t>(n_));
  for (int pe = 0; pe < n_; ++pe) {
    was_live[static_cast<std::size_t>(pe)] = live.live(pe);
    if (!live.live(pe)) continue;
    raise_flag(pe, arrived(attempt));
    if (pe + 1 == (n_ + 1) / 2) test_stop_point(me, what);  // half of them: an interrupted arrival
  }
  auto flag = [&](int src) {
    return std::atomic_ref<std::uint64_t>(*slot(src)).load(std::memory_order_acquire);
  };
  wait_for_sources(
      n_, [&](int src) { return flag(src) == arrived(attempt); },
      [&](int src) {
        const std::uint64_t seen = flag(src);
        return shmoe::WaitState{
            what,
            fmt::format("{} #{}: waiting for PE {} (its flag is at {} #{}{})", what, attempt, src,
                        what, seen / 2, seen % 2 ? ", ended without this PE" : ""),
            src,
            arrived(attempt),
            seen,
            arrived(attempt)};
      },
      nullptr, live, what, attempt, [&](int src) { return flag(src) == left_without(attempt); });
  // Those this attempt masked learn it at once if they come to it later.
  for (int pe = 0; pe < n_; ++pe) {
    if (pe != me && was_live[static_cast<std::size_t>(pe)] && !live.live(pe)) {
      raise_flag(pe, left_without(attempt));
    }
  }
}

std::uint64_t FlagArray::next_attempt(std::uint64_t last) const {
  std::uint64_t a = last + 1;
  for (int src = 0; src < n_; ++src) {
    const std::uint64_t v = std::atomic_ref<std::uint64_t>(*slot(src)).load();
    a = std::max(a, v / 2 + v % 2);
  }
  return a;
}

Agreement::Agreement(std::byte* base, int n_pes) : n_(n_pes) {
  for (int p = 0; p < 2; ++p) flags_[p] = FlagArray(base + p * FlagArray::bytes(n_pes), n_pes);
}

std::vector<int> Agreement::agree(std::uint64_t g, int me, bool refuse, const std::string& what,
                                  int mode, std::vector<int>* modes, SourceWaits* waits,
                                  const LiveSet& live) const {
  const FlagArray& flags = flags_[g % 2];
  const std::uint64_t raised = 256 * g;
  const auto code = static_cast<std::uint64_t>(mode & 127) * 2 + (refuse ? 1 : 0);
  for (int pe = 0; pe < n_; ++pe) {
    if (live.live(pe)) flags.raise(pe, me, raised + code);
  }
  std::vector<std::uint64_t> seen(static_cast<std::size_t>(n_), 0);
  auto flag = [&](int src) { return std::atomic_ref<std::uint64_t>(*flags.slot(src)); };
  wait_for_sources(
      n_,
      [&](int src) {
        return (seen[static_cast<std::size_t>(src)] = flag(src).load(std::memory_order_acquire)) >=
               raised;
      },
      [&](int src) {
        const std::uint64_t now = flag(src).load();
        return shmoe::WaitState{what,
                                fmt::format("{} #{}: waiting for PE {} (its flag is at call {})",
                                            what, g, src, now / 256),
                                src,
                                g,
                                now / 256,
                                g};
      },
      waits, live, what, g, [](int) { return false; });
  if (modes != nullptr) modes->assign(static_cast<std::size_t>(n_), mode);
  std::vector<int> refusing;
  for (int src = 0; src < n_; ++src) {
    if (!live.live(src)) continue;
    const std::uint64_t code_seen = seen[static_cast<std::size_t>(src)] - raised;
    if (code_seen & 1) refusing.push_back(src);
    if (modes != nullptr) (*modes)[static_cast<std::size_t>(src)] = static_cast<int>(code_seen / 2);
  }
  return refusing;
}

const char* tensor_name(Tensor t) {
  switch (t) {
    case Tensor::kX:
      return "x";
    case Tensor::kExpertIds:
      return "topk_idx";
    case Tensor::kRoutingWeights:
      return "topk_weights";
    case Tensor::kY:
      return "y";
    case Tensor::kExpandX:
      return "recv_x";
    case Tensor::kAssistInfo:
      return "recv_src_info";
    case Tensor::kEpRecvCount:
      return "recv_layout_prefix";
    case Tensor::kExpertTokenNums:
      return "num_recv_tokens_per_expert";
    case Tensor::kExpertTokenCounts:
      return "num_recv_tokens_per_expert";
    case Tensor::kTokenSide:
      return "token_side";
    case Tensor::kHeaderInts:
      return "header_ints";
    case Tensor::kRecvBlockX:
      return "recv_block_x";
  }
  return "a tensor";
}

void refuse_null(CallHeader& h, Tensor which) {
  h.error = InputError::kNullTensor;
  h.error_index[0] = static_cast<std::int32_t>(which);
}

namespace {
constexpr std::size_t round64(std::size_t v) {
  return (v + 63) / 64 * 64;
}
std::size_t header_stride(int n_pes, int experts_per_pe, int caller_ints) {
  return round64(sizeof(CallHeader) +
                 sizeof(std::int32_t) * (static_cast<std::size_t>(n_pes) * experts_per_pe +
                                         static_cast<std::size_t>(caller_ints)));
}
}  // namespace

HeaderExchange::HeaderExchange(std::byte* base, int n_pes, int experts_per_pe, int caller_ints)
    : stride_(header_stride(n_pes, experts_per_pe, caller_ints)),
      n_(n_pes),
      experts_per_pe_(experts_per_pe) {
  const std::size_t flags = round64(FlagArray::bytes(n_pes));
  const std::size_t rows = stride_ * static_cast<std::size_t>(n_pes);
  for (int p = 0; p < 2; ++p) {
    flags_[p] = FlagArray(base + p * flags, n_pes);
    rows_[p] = base + 2 * flags + p * rows;
  }
}

std::size_t HeaderExchange::bytes(int n_pes, int experts_per_pe, int caller_ints) {
  return 2 * round64(FlagArray::bytes(n_pes)) +
         2 * header_stride(n_pes, experts_per_pe, caller_ints) * static_cast<std::size_t>(n_pes);
}

std::vector<const CallHeader*> HeaderExchange::exchange(std::uint64_t g, int me,
                                                        const std::string& what, SourceWaits* waits,
                                                        const LiveSet& live) const {
  const int p = parity(g);
  CallHeader* my_row = header(p, me);
  if (live.bounded()) {
    // Shrink mode: each header's flag goes once that header has landed, with no fence.
    for (int pe = 0; pe < n_; ++pe) {
      if (live.live(pe)) flags_[p].raise_after(pe, me, g, my_row, my_row, pe == me ? 0 : stride_);
    }
    flags_[p].wait_for_every_pe(g, what, waits, live);
  } else {
    for (int pe = 0; pe < n_; ++pe) {
      if (pe != me && live.live(pe)) shmem_putmem(my_row, my_row, stride_, pe);
    }
    shmem_fence();
    flags_[p].all_reach(me, g, what, waits, live);
  }
  std::vector<const CallHeader*> headers(n_);
  for (int src = 0; src < n_; ++src) headers[src] = live.live(src) ? header(p, src) : nullptr;
  return headers;
}

namespace {

std::string recv_block_error(const char* op, int pe, const std::int32_t* i) {
  switch (static_cast<RecvBlockError>(i[0])) {
    case RecvBlockError::kNoBlocks:
      return fmt::format(
          "{}: PE {}: recv_block is given, but the buffer has no receive blocks (recv_blocks=0)",
          op, pe);
    case RecvBlockError::kAllHeld:
      return fmt::format(
          "{}: PE {}: all its receive blocks are held (recv_blocks={}): release one "
          "(shmoe_moe_release_block) or raise recv_blocks",
          op, pe, i[1]);
    case RecvBlockError::kRecvXToo:
      break;
  }
  return fmt::format("{}: PE {}: recv_x and recv_block are both given (one or the other)", op, pe);
}

}  // namespace

std::string first_call_error(const char* op, const std::vector<const CallHeader*>& headers,
                             int my_pe, int n_experts, int max_bs, const char* bs_name,
                             const char* limit_name) {
  const CallHeader& mine = *headers[my_pe];
  for (std::size_t pe = 0; pe < headers.size(); ++pe) {
    if (headers[pe] == nullptr) continue;
    const CallHeader& h = *headers[pe];
    if (h.hidden != mine.hidden || h.topk != mine.topk || h.experts_per_pe != mine.experts_per_pe ||
        h.dtype != mine.dtype || h.ffn != mine.ffn) {
      // Which parameters differ comes first: that is what the caller has to fix.
      std::vector<const char*> differ;
      if (h.hidden != mine.hidden) differ.push_back("hidden");
      if (h.topk != mine.topk) differ.push_back("num_topk");
      if (h.experts_per_pe != mine.experts_per_pe) differ.push_back("num_experts_per_pe");
      if (h.dtype != mine.dtype) differ.push_back("dtype");
      if (h.ffn != mine.ffn) differ.push_back("ffn");
      return fmt::format(
          "{}: PEs disagree on the parameters ({}): PE {} called with hidden={} num_topk={} "
          "num_experts_per_pe={} dtype={} intermediate_hidden={}, PE {} with hidden={} num_topk={} "
          "num_experts_per_pe={} "
          "dtype={} intermediate_hidden={}",
          op, fmt::join(differ, ", "), pe, h.hidden, h.topk, h.experts_per_pe, h.dtype, h.ffn,
          my_pe, mine.hidden, mine.topk, mine.experts_per_pe, mine.dtype, mine.ffn);
    }
  }
  for (std::size_t pe = 0; pe < headers.size(); ++pe) {
    if (headers[pe] == nullptr) continue;
    const CallHeader& h = *headers[pe];
    const auto* i = h.error_index;
    switch (h.error) {
      case InputError::kNone:
      case InputError::kCallerRetry:
        continue;
      case InputError::kExpertOutOfRange:
        return fmt::format(
            "{}: PE {}: topk_idx[{}][{}]={} is out of range (0..{}, or -1 for "
            "no expert)",
            op, pe, i[0], i[1], i[2], n_experts - 1);
      case InputError::kBsOutOfRange:
        return fmt::format("{}: PE {}: {}={} is out of range (0..{}, {})", op, pe, bs_name, i[0],
                           max_bs, limit_name);
      case InputError::kNullTensor:
        return fmt::format("{}: PE {}: required tensor '{}' is null", op, pe,
                           tensor_name(static_cast<Tensor>(i[0])));
      case InputError::kCallerRefused:
        return fmt::format(
            "{}: refused on every PE because PE {} refused its inputs (its own "
            "error says why)",
            op, pe);
      case InputError::kRecvBlock:
        return recv_block_error(op, static_cast<int>(pe), i);
    }
    return fmt::format("{}: PE {} reported error code {}", op, pe,
                       static_cast<std::int32_t>(h.error));
  }
  return {};
}

bool any_retry(const std::vector<const CallHeader*>& headers) {
  return std::any_of(headers.begin(), headers.end(), [](const CallHeader* h) {
    return h != nullptr && h->error == InputError::kCallerRetry;
  });
}

}  // namespace shmoe::moe
