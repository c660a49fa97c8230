#include "common/wait_registry.hpp"

#include <unistd.h>

#include <algorithm>
#include <mutex>

namespace shmoe {
namespace {

// A thread's current wait. The slot's mutex is what keeps a ticket alive while another thread
// describes it: the waiter takes it to leave. Uncontended except during a report.
struct ThreadSlot {
  std::mutex mutex;
  WaitTicket* current = nullptr;
  pid_t tid = 0;
};

struct Registry {
  std::mutex mutex;  // guards `slots`
  std::vector<ThreadSlot*> slots;
};

// Never destroyed: threads may still leave their slots while the process exits.
Registry& registry() {
  static auto* r = new Registry;
  return *r;
}

// Listed on a thread's first slow wait, unlisted when the thread ends.
struct SlotOwner {
  ThreadSlot slot;
  SlotOwner() {
    slot.tid = static_cast<pid_t>(::gettid());
    std::lock_guard lock(registry().mutex);
    registry().slots.push_back(&slot);
  }
  ~SlotOwner() {
    std::lock_guard lock(registry().mutex);
    auto& s = registry().slots;
    s.erase(std::remove(s.begin(), s.end(), &slot), s.end());
  }
};

ThreadSlot& my_slot() {
  thread_local SlotOwner owner;
  return owner.slot;
}

}  // namespace

void WaitTicket::enter() {
  ThreadSlot& slot = my_slot();
  since_ = std::chrono::steady_clock::now();
  std::lock_guard lock(slot.mutex);
  outer_ = slot.current;
  slot.current = this;
  listed_ = true;
}

void WaitTicket::leave() {
  ThreadSlot& slot = my_slot();
  std::lock_guard lock(slot.mutex);
  slot.current = outer_;
  listed_ = false;
}

std::vector<ThreadWait> current_waits() {
  std::vector<ThreadWait> waits;
  std::lock_guard lock(registry().mutex);
  for (ThreadSlot* slot : registry().slots) {
    std::lock_guard slot_lock(slot->mutex);
    if (slot->current == nullptr) continue;
    // Read under the slot's lock: a listed wait took its start time before it was listed, so
    // before this. A time read before the locks could precede a wait listed meanwhile (the test
    // saw one of -1 ms under TSan).
    const auto now = std::chrono::steady_clock::now();
    waits.push_back({slot->tid, std::chrono::duration<double>(now - slot->current->since()).count(),
                     slot->current->describe()});
  }
  return waits;
}

}  // namespace shmoe
