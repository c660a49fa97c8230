#include <fmt/format.h>
#include <shmem.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>

#include "common/backoff.hpp"
#include "moe/config_check.hpp"
#include "moe/context_state.hpp"
#include "moe/test_stop.hpp"

namespace shmoe::moe {
namespace {

// Where each part of the symmetric window lies: flags, the header exchange, received rows and
// their side-band, combine rows.
struct Window {
  std::size_t dispatch_done, combine_entry, combine_done, combine_pulls, read_masks, read_masked,
      live_sync, rejoin_flags, rejoin_counters, rejoin_outcome, beat, masked_news, headers,
      recv_rows, recv_band, combine_rows, recv_pool, total;
};

std::size_t row_bytes_of(const MoeConfig& c) {
  return static_cast<std::size_t>(c.hidden) * dtype_size(c.dtype);
}
std::size_t recv_capacity_of(const MoeConfig& c, int n_pes) {
  if (c.shrink_timeout_ms > 0)  // a fixed slot per (local expert, source PE, token)
    return static_cast<std::size_t>(c.experts_per_pe) * n_pes * c.max_bs;
  return c.max_recv_rows ? c.max_recv_rows : static_cast<std::size_t>(n_pes) * c.max_bs * c.topk;
}

// A receive block's rows: the receive window's, or a run per local expert.
std::size_t block_rows_of(const MoeConfig& c, int n_pes) {
  if (c.recv_block_expert_rows > 0)
    return static_cast<std::size_t>(c.experts_per_pe) * c.recv_block_expert_rows;
  return recv_capacity_of(c, n_pes);
}

std::size_t band_bytes_of(const MoeConfig& c) {  // RowMeta, then the side data, 4-byte aligned
  return (sizeof(RowMeta) + static_cast<std::size_t>(c.token_side_bytes) + 3) / 4 * 4;
}

Window window_layout(const MoeConfig& c, int n_pes) {
  WindowLayout l;
  const std::size_t flags = FlagArray::bytes(n_pes), row = row_bytes_of(c);
  const std::size_t cap = recv_capacity_of(c, n_pes);
  Window w;
  w.dispatch_done = l.take(flags);
  w.combine_entry = l.take(Agreement::bytes(n_pes));
  w.combine_done = l.take(flags);
  w.combine_pulls = l.take(flags);
  w.read_masks = l.take(flags);
  w.read_masked = l.take(flags);
  w.live_sync = l.take(flags);
  w.rejoin_flags = l.take(2 * flags);
  w.rejoin_counters = l.take(2 * static_cast<std::size_t>(n_pes) * MoeBuffer::State::kRejoinWords *
                             sizeof(std::uint64_t));
  w.rejoin_outcome = l.take(flags);
  w.beat = l.take(sizeof(std::uint64_t));
  w.masked_news = l.take(flags);
  w.headers = l.take(HeaderExchange::bytes(n_pes, c.experts_per_pe, c.header_ints));
  w.recv_rows = l.take(cap * row);
  w.recv_band = l.take(cap * band_bytes_of(c));
  w.combine_rows = l.take(static_cast<std::size_t>(c.max_bs) * c.topk * row);
  w.recv_pool = l.take(static_cast<std::size_t>(c.recv_blocks) * block_rows_of(c, n_pes) * row);
  w.total = l.total();
  return w;
}

// Shrink mode's bound must end a wait before the hang report does (SHMOE_HANG_TIMEOUT, this PE's,
// the same on every PE of a job).
std::string shrink_bound_error(const MoeConfig& c) {
  if (c.shrink_timeout_ms == 0) return "";
  const auto hang =
      std::chrono::duration_cast<std::chrono::milliseconds>(wait_policy().hang_timeout).count();
  const long long most = hang > 0 ? hang - 1 : (1LL << 31) - 1;
  if (c.shrink_timeout_ms >= 1 && c.shrink_timeout_ms <= most) return "";
  return fmt::format(
      "shrink_timeout_ms={} is out of range (1..{}) (0 for off; below SHMOE_HANG_TIMEOUT)",
      c.shrink_timeout_ms, most);
}

}  // namespace

std::string MoeBuffer::State::check_mask(const char* op, std::int32_t* pe_mask) {
  if (!shrink()) {
    if (pe_mask == nullptr) return "";
    return fmt::format("{}: PE {}: pe_mask is given, but shrink mode is off (shrink_timeout_ms=0)",
                       op, me);
  }
  if (pe_mask == nullptr) return fmt::format("{}: PE {}: shrink mode needs a pe_mask", op, me);
  if (pe_mask[me] != 0) {
    return fmt::format("{}: PE {}: pe_mask[{}]={} masks this PE itself (0 required)", op, me, me,
                       pe_mask[me]);
  }
  for (int pe = 0; pe < n_pes && !late_mask.empty(); ++pe) {
    if (late_mask[static_cast<std::size_t>(pe)] != 0) pe_mask[pe] = 1;
  }
  late_mask.clear();
  return "";
}

LiveSet MoeBuffer::State::late_set(const LiveSet& live) {
  if (!live.bounded()) return live;
  late_mask.assign(static_cast<std::size_t>(n_pes), 0);
  for (int pe = 0; pe < n_pes; ++pe) late_mask[static_cast<std::size_t>(pe)] = !live.live(pe);
  return LiveSet(late_mask.data(), live.bound(), &shrink_words);
}

void MoeBuffer::State::keep_only_late(const LiveSet& live) {
  for (int pe = 0; pe < n_pes && !late_mask.empty(); ++pe) {
    if (!live.live(pe)) late_mask[static_cast<std::size_t>(pe)] = 0;
  }
}

std::vector<bool> segments_for_copy_engine(const std::vector<std::size_t>& segment_bytes,
                                           std::size_t threshold) {
  std::size_t total = 0, nonempty = 0;
  for (auto b : segment_bytes) {
    total += b;
    nonempty += b > 0;
  }
  const double average = nonempty ? static_cast<double>(total) / nonempty : 0;
  std::vector<bool> engine(segment_bytes.size());
  for (std::size_t i = 0; i < segment_bytes.size(); ++i) {
    engine[i] = segment_bytes[i] >= threshold && static_cast<double>(segment_bytes[i]) > average;
  }
  return engine;
}

MoeBuffer::MoeBuffer(const MoeConfig& config) : state_(std::make_unique<State>()) {
  State& s = *state_;
  if (const std::string e = config_error(config, s.n_pes); !e.empty())
    throw Refused("MoeBuffer: " + e);
  if (const std::string e = shrink_bound_error(config); !e.empty())
    throw Refused("MoeBuffer: " + e);
  check_test_stop_setting();
  s.cfg = config;
  if (s.cfg.workers.total() == 0) s.cfg.workers = kernel::default_worker_counts(s.n_pes);
  if (s.cfg.workers.vector == 0) s.cfg.workers.vector = 1;
  const auto& c = s.cfg;
  s.row_bytes = row_bytes_of(c);
  s.recv_cap = recv_capacity_of(c, s.n_pes);

  const Window wl = window_layout(c, s.n_pes);
  const std::size_t off = wl.total;
  if (!s.open_window(off, {wl.headers, wl.combine_done, wl.recv_rows, wl.combine_rows},
                     c.experts_per_pe, c.header_ints)) {
    throw Refused(fmt::format(
        "MoeBuffer: the symmetric windows need {} bytes per PE (recv rows {} x {} bytes, combine "
        "rows {} x {} bytes, {} receive blocks), more than is free in the "
        "symmetric heap: raise SHMEM_SYMMETRIC_SIZE or lower "
        "max_recv_rows/max_tokens_per_pe/recv_blocks",
        off, s.recv_cap, s.row_bytes, static_cast<std::size_t>(c.max_bs) * c.topk, s.row_bytes,
        c.recv_blocks));
  }
  s.dispatch_done = FlagArray(s.window + wl.dispatch_done, s.n_pes);
  s.combine_entry = Agreement(s.window + wl.combine_entry, s.n_pes);
  s.combine_pulls = FlagArray(s.window + wl.combine_pulls, s.n_pes);
  s.read_masks = FlagArray(s.window + wl.read_masks, s.n_pes);
  s.read_masked = FlagArray(s.window + wl.read_masked, s.n_pes);
  s.live_sync = FlagArray(s.window + wl.live_sync, s.n_pes);
  for (int p = 0; p < 2; ++p) {
    s.rejoin_flags[p] =
        FlagArray(s.window + wl.rejoin_flags + p * FlagArray::bytes(s.n_pes), s.n_pes);
  }
  s.rejoin_counters = reinterpret_cast<std::uint64_t*>(s.window + wl.rejoin_counters);
  s.rejoin_outcome = FlagArray(s.window + wl.rejoin_outcome, s.n_pes);
  s.shrink_words.beat = reinterpret_cast<std::uint64_t*>(s.window + wl.beat);
  s.shrink_words.masked = FlagArray(s.window + wl.masked_news, s.n_pes);
  s.shrink_words.me = s.me;
  s.recv_band = s.window + wl.recv_band;
  s.band_bytes = band_bytes_of(c);
  std::vector<std::byte*> peer_pool;
  for (int pe = 0; pe < s.n_pes; ++pe) {
    s.peer_recv_rows.push_back(static_cast<std::byte*>(shmem_ptr(s.recv_rows, pe)));
    peer_pool.push_back(c.recv_blocks > 0
                            ? static_cast<std::byte*>(shmem_ptr(s.window + wl.recv_pool, pe))
                            : nullptr);
  }
  s.blocks = RecvBlocks(s.window + wl.recv_pool, block_rows_of(c, s.n_pes) * s.row_bytes,
                        c.recv_blocks, std::move(peer_pool));
  s.landed = s.recv_rows;
  s.peer_landed = s.peer_recv_rows;
  s.dest_rows.assign(static_cast<std::size_t>(s.n_pes), s.recv_rows);
  s.pool = std::make_unique<kernel::WorkerPool>(c.workers.total());
  // Shrink mode's flags are held until their data lands: the engine waits for no other host.
  s.engine = std::make_unique<kernel::CopyEngine>(s.shrink() ? kernel::EngineQuiet::kMappedPes
                                                             : kernel::EngineQuiet::kEveryPe);
}

MoeBuffer::~MoeBuffer() {
  state_->engine.reset();
  state_->close();
}

std::size_t MoeBuffer::window_bytes(const MoeConfig& config, int n_pes) {
  return window_layout(config, n_pes).total;
}

const MoeConfig& MoeBuffer::config() const {
  return state_->cfg;
}
int MoeBuffer::n_pes() const {
  return state_->n_pes;
}
int MoeBuffer::my_pe() const {
  return state_->me;
}
std::size_t MoeBuffer::recv_capacity() const {
  return state_->recv_cap;
}
const OpTiming& MoeBuffer::last_timing() const {
  return state_->timing;
}
void* MoeBuffer::receive_window() {
  return state_->recv_rows;
}
void MoeBuffer::release_block(int block) {
  if (std::string e = state_->blocks.release(block, "release_block"); !e.empty())
    throw Refused(std::move(e));
}
int MoeBuffer::held_blocks() const {
  return state_->blocks.held();
}

}  // namespace shmoe::moe

namespace shmoe::moe {

void sync_live(MoeBuffer& ctx, std::int32_t* pe_mask) {
  auto& s = ctx.state();
  if (!s.shrink()) {
    throw Refused(fmt::format(
        "sync_live: PE {}: shrink mode is off (shrink_timeout_ms=0) for this context", s.me));
  }
  if (const std::string e = s.check_mask("sync_live", pe_mask); !e.empty()) throw Refused(e);
  // Live PEs have made the same syncs since their last rejoin (a masked one may have made more
  // alone; a rejoin takes the most), so a flag of any other sync is not an arrival.
  s.live_sync.meet(s.me, ++s.sync_generation, "sync_live", s.live_set(pe_mask));
}

namespace {

// The contexts whose counters a rejoin brings together: `first`, then the others.
std::vector<MoeBuffer::State*> rejoin_contexts(MoeBuffer::State& first,
                                               const std::vector<MoeBuffer*>& others) {
  std::vector<MoeBuffer::State*> all{&first};
  for (MoeBuffer* o : others) {
    if (o == nullptr || !o->state().shrink() || o->n_pes() != first.n_pes) {
      throw Refused(fmt::format(
          "rejoin: PE {}: others[{}] is {}, not a shrink-mode context of the same {} PEs", first.me,
          all.size() - 1, o == nullptr ? "null" : "another kind of context", first.n_pes));
    }
    all.push_back(&o->state());
  }
  if (all.size() > MoeBuffer::State::kMaxRejoinContexts) {
    throw Refused(fmt::format("rejoin: PE {}: {} other contexts, at most {}", first.me,
                              others.size(), MoeBuffer::State::kMaxRejoinContexts - 1));
  }
  return all;
}

// The first `words` of each live PE's row of rejoin counters, copied; a PE whose flag says,
// after the copy, that it went on to a later attempt is masked (a + 2 has the same parity, and
// may have written over its row).
std::vector<std::uint64_t> copy_current_rows(const MoeBuffer::State& s, const FlagArray& flags,
                                             std::uint64_t a, const LiveSet& live,
                                             const std::uint64_t* rows, std::size_t words) {
  std::vector<std::uint64_t> copy(static_cast<std::size_t>(s.n_pes) * words, 0);
  for (int pe = 0; pe < s.n_pes; ++pe) {
    if (!live.live(pe)) continue;
    const std::uint64_t* theirs =
        rows + static_cast<std::size_t>(pe) * MoeBuffer::State::kRejoinWords;
    std::copy(theirs, theirs + words,
              copy.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(pe) * words));
    std::atomic_thread_fence(std::memory_order_acquire);  // the row read before the flag again
    if (std::atomic_ref<std::uint64_t>(*flags.slot(pe)).load(std::memory_order_acquire) !=
        FlagArray::arrived(a)) {
      live.mask(pe, "rejoin", a, "it went on to a later rejoin while this PE read its counters");
    }
  }
  return copy;
}

}  // namespace

void rejoin(MoeBuffer& ctx, std::int32_t* pe_mask, const std::vector<MoeBuffer*>& others) {
  auto& s = ctx.state();
  if (!s.shrink()) {
    throw Refused(fmt::format(
        "rejoin: PE {}: shrink mode is off (shrink_timeout_ms=0) for this context", s.me));
  }
  if (const std::string e = s.check_mask("rejoin", pe_mask); !e.empty()) throw Refused(e);
  const std::vector<MoeBuffer::State*> all = rejoin_contexts(s, others);
  // Every PE takes part, masked or not, each with its own call counters: a PE that was masked
  // (stopped, then resumed) has made fewer calls, or calls alone. A PE that missed a rejoin (the
  // others ended it without it) joins the one the others are in, or the next (next_attempt).
  const std::uint64_t a = std::max(s.rejoin_flags[0].next_attempt(s.rejoin_generation),
                                   s.rejoin_flags[1].next_attempt(s.rejoin_generation));
  const FlagArray& flags = s.rejoin_flags[a % 2];
  constexpr std::size_t kWords = MoeBuffer::State::kRejoinWords;
  std::uint64_t* rows = s.rejoin_counters + static_cast<std::size_t>(a % 2) * s.n_pes * kWords;
  std::uint64_t* mine = rows + static_cast<std::size_t>(s.me) * kWords;
  constexpr std::size_t kCounters = MoeBuffer::State::kCounters;
  for (std::size_t i = 0; i < all.size(); ++i) {
    mine[kCounters * i] = all[i]->dispatch_generation;
    mine[kCounters * i + 1] = all[i]->combine_generation;
    mine[kCounters * i + 2] = all[i]->sync_generation;
  }
  const std::size_t bytes = kCounters * all.size() * sizeof(std::uint64_t);
  // Those that do not come within the bound are masked; the others continue from the highest
  // counters any of them reached, the same on all of them. A PE's row is the one of this
  // attempt while its flag still says so: one that went on to attempt a + 2 (same parity, after
  // masking this PE) may have written over it, and is masked here too.
  std::vector<std::int32_t> arrived(static_cast<std::size_t>(s.n_pes), 0);
  const LiveSet live(arrived.data(), std::chrono::milliseconds(s.cfg.shrink_timeout_ms));
  // My counters go with my flag, held until they land (a fence would wait for a stopped PE).
  flags.meet(s.me, a, "rejoin", live, mine, bytes);
  std::vector<std::uint64_t> top(kCounters * all.size(), 0);
  const auto copied = copy_current_rows(s, flags, a, live, rows, top.size());
  settle_rejoin_outcomes(s, a, live);  // across hosts: those whose own outcome left this PE out
  for (int pe = 0; pe < s.n_pes; ++pe) {
    if (!live.live(pe)) continue;
    for (std::size_t i = 0; i < top.size(); ++i)
      top[i] = std::max(top[i], copied[static_cast<std::size_t>(pe) * top.size() + i]);
  }
  for (int pe = 0; pe < s.n_pes; ++pe) pe_mask[pe] = arrived[static_cast<std::size_t>(pe)];
  for (std::size_t i = 0; i < all.size(); ++i) {
    all[i]->dispatch_generation = top[kCounters * i];
    all[i]->combine_generation = top[kCounters * i + 1];
    all[i]->sync_generation = top[kCounters * i + 2];
    all[i]->late_mask.clear();
    all[i]->dispatched = false;
  }
  s.rejoin_generation = a;
  for (MoeBuffer::State* c : all) c->shrink_words.epoch = a;  // masks told before are void
}

}  // namespace shmoe::moe
