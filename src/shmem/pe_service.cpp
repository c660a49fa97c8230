#include "shmem/pe_service.hpp"

#include <pthread.h>

namespace shmoe {

PeService::PeService(bootstrap::ConfigStoreClient& client, HangWatch& hang_watch, Handlers handlers)
    : client_(client), hang_watch_(hang_watch), handlers_(std::move(handlers)) {
  client_.watch(bootstrap::kAbortKey);
  client_.watch(kHangKey);
  client_.watch(bootstrap::lost_event_key(losses_watched_));
  thread_ = std::thread([this] { serve(); });
  // Named here, not in the thread, so that it has its name once shmem_init returns.
  ::pthread_setname_np(thread_.native_handle(), kServiceThreadName);
}

PeService::~PeService() {
  stopping_ = true;
  hang_watch_.stop();
  thread_.join();
}

void PeService::serve() {
  HangWatch::accept_sigusr1_here();
  try {
    while (true) {
      // poll() is where a signal handler runs at once, ThreadSanitizer's included.
      bootstrap::StoreEvents got =
          client_.wait_for_events(hang_watch_.wake_fd(), -std::chrono::milliseconds(1));
      for (bootstrap::StoreEvent& e : got.events) {
        if (e.key == bootstrap::kAbortKey) {
          if (!stopping_) handlers_.on_abort(std::move(e.value));
        } else if (e.key == kHangKey) {
          if (!stopping_) hang_watch_.on_peer_hang(e.value);
        } else if (e.key == bootstrap::lost_event_key(losses_watched_)) {
          // Each loss has a key of its own (a watch fires once); the next one is watched now.
          handlers_.on_lost(e.value);
          client_.watch(bootstrap::lost_event_key(++losses_watched_));
        }
      }
      if (got.other_ready && !hang_watch_.on_wake()) return;
    }
  } catch (const std::exception& e) {
    if (!stopping_) handlers_.on_store_lost(e);
  }
}

}  // namespace shmoe
