// Distributed locks (OpenSHMEM 1.5 section 9.11): an MCS queue lock, so waiters are served in
// the order they arrived and each spins only on a word in its own segment.
//
// The symmetric long of the lock holds two 32-bit words. The first, on PE 0 only, is the tail of
// the queue (PE + 1 of the last waiter, 0: free). The second, on every PE, is that PE's queue
// node: the PE + 1 of its successor in the low 31 bits and kWaiting while it waits for the lock.
// A successor links itself with an atomic OR and the holder grants with an atomic AND, so the
// two never overwrite each other.
#include <atomic>
#include <mutex>
#include <set>

#include "common/backoff.hpp"
#include "shmem/profiling.hpp"
#include "shmem/runtime.hpp"

namespace {

using shmoe::transport::AmoOp;

constexpr std::uint32_t kWaiting = 0x80000000u;
constexpr std::uint32_t kNextMask = 0x7fffffffu;
constexpr std::size_t kTail = 0;  // byte offsets inside the long
constexpr std::size_t kNode = 4;

struct Lock {
  shmoe::Runtime& rt;
  std::size_t off;
  int me;
  std::uint32_t* node;  // this PE's node word
};

Lock resolve(long* lock, const char* fn) {
  auto& rt = shmoe::runtime(fn);
  std::size_t off = shmoe::symmetric_offset(rt, lock, sizeof(long), fn, "lock");
  if (off % alignof(long) != 0) {
    shmoe::api_error(fn, "lock={} is not aligned to {} bytes", static_cast<void*>(lock),
                     alignof(long));
  }
  return {rt, off, rt.rank(), reinterpret_cast<std::uint32_t*>(rt.heap_base() + off + kNode)};
}

std::uint32_t amo32(Lock& l, int pe, std::size_t word, AmoOp op, std::uint32_t operand,
                    std::uint32_t compare = 0) {
  return static_cast<std::uint32_t>(
      l.rt.transport().fetch_atomic(nullptr, pe, l.off + word, {op, 4, operand, compare}));
}

std::uint32_t node_value(const Lock& l) {
  return std::atomic_ref<std::uint32_t>(*l.node).load(std::memory_order_acquire);
}

// The locks this PE holds (by symmetric offset). The queue alone cannot tell a clear by a PE
// that does not hold the lock, or a second set by its holder, from a hand-over in progress: both
// would wait forever. Locks belong to the PE, not to a thread.
class HeldLocks {
 public:
  void acquired(const Lock& l) {
    std::lock_guard g(mutex_);
    held_.insert(l.off);
  }
  void refuse_if_held(const Lock& l, const char* fn) {
    std::lock_guard g(mutex_);
    if (held_.count(l.off) != 0) {
      shmoe::api_error(fn,
                       "this PE already holds the lock at symmetric offset {:#x} (OpenSHMEM "
                       "locks are not recursive: shmem_clear_lock it first)",
                       l.off);
    }
  }
  void released(const Lock& l, const char* fn) {
    std::lock_guard g(mutex_);
    if (held_.erase(l.off) == 0) {
      shmoe::api_error(fn,
                       "this PE does not hold the lock at symmetric offset {:#x}: only the "
                       "PE whose shmem_set_lock or shmem_test_lock took it may clear it",
                       l.off);
    }
  }

 private:
  std::mutex mutex_;
  std::set<std::size_t> held_;
};

HeldLocks& held_locks() {
  static HeldLocks locks;
  return locks;
}

}  // namespace

extern "C" {

void pshmem_set_lock(long* lock) {
  Lock l = resolve(lock, "shmem_set_lock");
  held_locks().refuse_if_held(l, "shmem_set_lock");
  // Nobody writes this PE's node while it is not queued: reset it, then join the queue.
  amo32(l, l.me, kNode, AmoOp::kStore, kWaiting);
  std::uint32_t prev = amo32(l, 0, kTail, AmoOp::kSwap, static_cast<std::uint32_t>(l.me + 1));
  if (prev == 0) {
    held_locks().acquired(l);
    return;
  }
  amo32(l, static_cast<int>(prev - 1), kNode, AmoOp::kOr, static_cast<std::uint32_t>(l.me + 1));
  shmoe::wait_until(
      [&] { return (node_value(l) & kWaiting) == 0; },
      [&] {
        const int ahead = static_cast<int>(prev - 1);
        return shmoe::WaitState{
            "shmem_set_lock",
            fmt::format("shmem_set_lock on symmetric offset {:#x}: queued behind PE {}", l.off,
                        ahead),
            ahead,
            0,
            node_value(l),
            0};
      });
  held_locks().acquired(l);
}

int pshmem_test_lock(long* lock) {
  Lock l = resolve(lock, "shmem_test_lock");
  if (amo32(l, 0, kTail, AmoOp::kLoad, 0) != 0) return 1;
  amo32(l, l.me, kNode, AmoOp::kStore, 0);
  if (amo32(l, 0, kTail, AmoOp::kCompareSwap, static_cast<std::uint32_t>(l.me + 1), 0) != 0) {
    return 1;
  }
  held_locks().acquired(l);
  return 0;
}

void pshmem_clear_lock(long* lock) {
  Lock l = resolve(lock, "shmem_clear_lock");
  held_locks().released(l, "shmem_clear_lock");
  l.rt.transport().quiet(
      nullptr);  // what was written under the lock is complete before it passes on
  std::uint32_t next = node_value(l) & kNextMask;
  if (next == 0) {
    if (amo32(l, 0, kTail, AmoOp::kCompareSwap, 0, static_cast<std::uint32_t>(l.me + 1)) ==
        static_cast<std::uint32_t>(l.me + 1)) {
      return;  // nobody was waiting
    }
    // A successor swapped itself into the tail and is about to link itself to this node.
    shmoe::wait_until([&] { return (next = node_value(l) & kNextMask) != 0; },
                      [&] {
                        return fmt::format(
                            "shmem_clear_lock on symmetric offset {:#x}: waiting for the next PE "
                            "to link itself",
                            l.off);
                      });
  }
  amo32(l, static_cast<int>(next - 1), kNode, AmoOp::kAnd, ~kWaiting);
}

SHMOE_WEAK_ALIAS(shmem_set_lock)
SHMOE_WEAK_ALIAS(shmem_test_lock)
SHMOE_WEAK_ALIAS(shmem_clear_lock)

}  // extern "C"
