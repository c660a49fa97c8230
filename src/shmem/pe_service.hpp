// The PE's one service thread ("shmoe-service"). It sleeps until the config store pushes an event
// on the PE's one connection (the job's abort, another PE's hang, a lost PE) or SIGUSR1 comes,
// and acts on it; the program's threads use the same connection meanwhile.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <string>
#include <thread>

#include "bootstrap/config_store.hpp"
#include "shmem/hang_watch.hpp"

namespace shmoe {

inline constexpr const char* kServiceThreadName = "shmoe-service";

class PeService {
 public:
  struct Handlers {
    // kAbortKey's value: the job is over (it does not return unless the PE is leaving anyway).
    std::function<void(std::string)> on_abort;
    // SHMOE_PE_LOSS=continue: the store lost PEs; the comma list of every PE lost so far.
    std::function<void(const std::string&)> on_lost;
    // The connection to the store failed.
    std::function<void(const std::exception&)> on_store_lost;
  };

  // Asks the store to push kAbortKey, kHangKey and the first loss, then starts the thread.
  PeService(bootstrap::ConfigStoreClient& client, HangWatch& hang_watch, Handlers handlers);
  ~PeService();  // stops and joins the thread
  PeService(const PeService&) = delete;
  PeService& operator=(const PeService&) = delete;

 private:
  void serve();

  bootstrap::ConfigStoreClient& client_;
  HangWatch& hang_watch_;
  Handlers handlers_;
  std::atomic<bool> stopping_{false};
  std::size_t losses_watched_ = 1;  // lost_event_key(n) of the loss the store is to push next
  std::thread thread_;
};

}  // namespace shmoe
