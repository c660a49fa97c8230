#include "common/pe_loss.hpp"

#include <fmt/format.h>

#include <atomic>
#include <charconv>
#include <cstdint>

#include "common/error.hpp"
#include "common/log.hpp"

namespace shmoe {
namespace {

constexpr int kWordBits = 64;
std::atomic<std::uint64_t> g_lost[kMaxTrackedPes / kWordBits];
std::atomic<bool> g_any_lost{false};
std::atomic<bool> g_watch{false};
thread_local int t_handled_here = 0;

std::atomic<std::uint64_t>& word_of(int pe) {
  return g_lost[pe / kWordBits];
}
std::uint64_t bit_of(int pe) {
  return std::uint64_t{1} << (pe % kWordBits);
}

int parse_rank(std::string_view item, std::string_view list) {
  int rank = -1;
  const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), rank);
  if (ec != std::errc() || end != item.data() + item.size() || rank < 0) {
    throw make_error("the config store's list of lost PEs '{}' is not a comma list of ranks", list);
  }
  return rank;
}

}  // namespace

bool pe_lost(int pe) {
  if (!g_any_lost.load(std::memory_order_relaxed) || pe < 0 || pe >= kMaxTrackedPes) return false;
  return (word_of(pe).load(std::memory_order_acquire) & bit_of(pe)) != 0;
}

bool any_pe_lost() {
  return g_any_lost.load(std::memory_order_acquire);
}

std::vector<int> lost_pes() {
  std::vector<int> out;
  if (!any_pe_lost()) return out;
  for (int pe = 0; pe < kMaxTrackedPes; ++pe) {
    if (pe_lost(pe)) out.push_back(pe);
  }
  return out;
}

void mark_pes_lost(std::string_view list) {
  std::vector<int> ranks;
  // Every item between commas must be a rank: "2," and "1,,2" are not lists the store writes.
  for (std::size_t start = 0; !list.empty();) {
    const std::size_t comma = list.find(',', start);
    ranks.push_back(parse_rank(list.substr(start, comma - start), list));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  for (int pe : ranks) {
    if (pe < kMaxTrackedPes) word_of(pe).fetch_or(bit_of(pe), std::memory_order_release);
  }
  if (!ranks.empty()) g_any_lost.store(true, std::memory_order_release);
}

void clear_lost_pes() {
  g_any_lost.store(false, std::memory_order_release);
  for (auto& w : g_lost) w.store(0, std::memory_order_relaxed);
}

void set_watch_lost_pes(bool on) {
  g_watch.store(on, std::memory_order_relaxed);
}

bool watch_lost_pes() {
  return g_watch.load(std::memory_order_relaxed);
}

LostPesHandledHere::LostPesHandledHere(bool active) : active_(active) {
  if (active_) ++t_handled_here;
}

LostPesHandledHere::~LostPesHandledHere() {
  if (active_) --t_handled_here;
}

bool lost_pes_handled_here() {
  return t_handled_here > 0;
}

void fail_if_waiting_for_lost_pe(const WaitState& what) {
  if (what.peer < 0 || lost_pes_handled_here() || !pe_lost(what.peer)) return;
  log::fatal(fmt::format(
      "{}: PE {} was lost (SHMOE_PE_LOSS=continue); this call cannot complete without it",
      what.detail, what.peer));
}

}  // namespace shmoe
