// Which waits are in progress in this process, so that a hang report can say what every thread
// waits for, not only the thread whose wait timed out. A wait lists itself only once it leaves
// its spin phase (see Backoff): a wait that spinning ends never touches the registry.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <vector>

#include "common/wait_state.hpp"

namespace shmoe {

// One wait of one thread. It describes itself through the caller's describe() callable, which
// must outlive the ticket (both live in the waiting frame).
class WaitTicket {
 public:
  template <typename Describe>
  explicit WaitTicket(const Describe& describe)
      : describe_(&describe), call_([](const void* d) -> WaitState {
          return to_wait_state((*static_cast<const Describe*>(d))());
        }) {}
  ~WaitTicket() {
    if (listed_) leave();
  }
  WaitTicket(const WaitTicket&) = delete;
  WaitTicket& operator=(const WaitTicket&) = delete;

  // Lists the wait in this thread's slot; called once, on the wait's slow path.
  void enter();
  WaitState describe() const { return call_(describe_); }
  std::chrono::steady_clock::time_point since() const { return since_; }

  // Callers that only have a sentence give it as the detail, with "wait" as the call.
  static WaitState to_wait_state(WaitState s) { return s; }
  static WaitState to_wait_state(std::string text) { return {"wait", std::move(text)}; }

 private:
  void leave();

  const void* describe_;
  WaitState (*call_)(const void*);
  bool listed_ = false;
  WaitTicket* outer_ = nullptr;  // a wait this thread was already in (not expected, but safe)
  std::chrono::steady_clock::time_point since_{};
};

struct ThreadWait {
  pid_t tid = 0;
  double waited_s = 0;
  WaitState state;
};

// Every listed wait of every thread of this process, each described now. Safe from any thread:
// a wait cannot end (and free what its describe() reads) while it is being described.
std::vector<ThreadWait> current_waits();

}  // namespace shmoe
