// A timeline of what each worker of a kernel did: one event per stage (name, index, begin, end),
// recorded into the worker's own list so that recording takes no lock. Off unless enabled, and
// then a scope costs two clock reads.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>
#include <vector>

namespace shmoe::kernel {

struct StageEvent {
  int worker = 0;
  std::string_view stage;  // a string literal
  int index = 0;           // e.g. the wave number; -1 when none
  // Microseconds of the steady clock, which all processes of a host share, so the PEs' timelines
  // line up.
  double begin_us = 0, end_us = 0;
};

class StageTrace {
 public:
  void set_enabled(bool on) { enabled_ = on; }
  bool enabled() const { return enabled_; }
  // Clears the lists; call before the kernel launch.
  void start(int workers);
  // All events of the last launch, worker by worker.
  std::vector<StageEvent> events() const;

  class Scope {
   public:
    Scope(StageTrace* t, int worker, std::string_view stage, int index);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    StageTrace* trace_;
    StageEvent event_;
  };
  Scope scope(int worker, std::string_view stage, int index = -1) {
    return Scope(enabled_ ? this : nullptr, worker, stage, index);
  }

 private:
  double now_us() const;
  bool enabled_ = false;
  std::vector<std::vector<StageEvent>> per_worker_;
};

}  // namespace shmoe::kernel
