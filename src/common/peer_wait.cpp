#include "common/peer_wait.hpp"

#include <atomic>
#include <cstdint>

#include "common/pe_loss.hpp"

namespace shmoe {
namespace {

constexpr int kWordBits = 64;
thread_local std::chrono::milliseconds t_bound{0};
std::atomic<std::uint64_t> g_unanswered[kMaxTrackedPes / kWordBits];
std::atomic<bool> g_any{false};

std::uint64_t bit_of(int pe) {
  return std::uint64_t{1} << (pe % kWordBits);
}

}  // namespace

PeerWaitBound::PeerWaitBound(std::chrono::milliseconds bound, bool active) : active_(active) {
  if (!active_) return;
  outer_ = t_bound;
  t_bound = bound;
}

PeerWaitBound::~PeerWaitBound() {
  if (active_) t_bound = outer_;
}

std::chrono::milliseconds peer_wait_bound() {
  return t_bound;
}

void mark_pe_unanswered(int pe) {
  if (pe < 0 || pe >= kMaxTrackedPes) return;
  g_unanswered[pe / kWordBits].fetch_or(bit_of(pe), std::memory_order_release);
  g_any.store(true, std::memory_order_release);
}

bool pe_unanswered(int pe) {
  if (!g_any.load(std::memory_order_relaxed) || pe < 0 || pe >= kMaxTrackedPes) return false;
  return (g_unanswered[pe / kWordBits].load(std::memory_order_acquire) & bit_of(pe)) != 0;
}

void clear_unanswered_pes() {
  if (!g_any.exchange(false, std::memory_order_acq_rel)) return;
  for (auto& w : g_unanswered) w.store(0, std::memory_order_relaxed);
}

}  // namespace shmoe
