#include "kernel/stage_trace.hpp"

namespace shmoe::kernel {

void StageTrace::start(int workers) {
  per_worker_.assign(static_cast<std::size_t>(workers), {});
}

std::vector<StageEvent> StageTrace::events() const {
  std::vector<StageEvent> all;
  for (const auto& list : per_worker_) all.insert(all.end(), list.begin(), list.end());
  return all;
}

double StageTrace::now_us() const {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

StageTrace::Scope::Scope(StageTrace* t, int worker, std::string_view stage, int index) : trace_(t) {
  if (trace_ == nullptr) return;
  event_ = {worker, stage, index, trace_->now_us(), 0};
}

StageTrace::Scope::~Scope() {
  if (trace_ == nullptr) return;
  event_.end_us = trace_->now_us();
  trace_->per_worker_[static_cast<std::size_t>(event_.worker)].push_back(event_);
}

}  // namespace shmoe::kernel
