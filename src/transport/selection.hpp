// Which transport reaches which PE, and the transports themselves: at start-up every PE tells the
// others its host and the transport mode it was given; PEs of one host map each other's
// segments (unless the mode is ucx), and UCX reaches the rest. The SHMEM layer gets one
// Transport and the list of PEs it reaches by load/store.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/config_store.hpp"
#include "common/settings.hpp"
#include "heap/segment.hpp"
#include "transport/shm_transport.hpp"
#include "transport/transport.hpp"
#include "transport/ucx_options.hpp"

namespace shmoe::transport {

class UcxTransport;
class RoutedTransport;

// How PEs reach each other (SHMOE_TRANSPORT): kAuto maps the PEs of this host and uses UCX for
// the others; kShm refuses a job that spans hosts; kUcx uses UCX for every peer, even on one host.
using Mode = settings::Transport;

// What this PE tells the others before any transport exists.
struct HostIdentity {
  std::string host;         // PEs of one host share memory
  std::string system_host;  // the hostname: PEs that share cores
  Mode mode = Mode::kAuto;
};

struct PeerPlan {
  std::vector<bool> mapped;            // per PE: reached by load/store (this PE included)
  std::vector<int> shared_memory_pes;  // the mapped PEs, ascending
  int pes_sharing_cores = 0;           // PEs on this PE's system host, itself included
  bool use_ucx = false;                // some peer is reached through UCX
};

// Collective: exchanges every PE's identity and decides. Throws where the PEs disagree on the
// mode, or where the mode is shm and the job spans hosts.
PeerPlan plan_peers(bootstrap::StoreCollectives& collectives, int rank, int size,
                    const HostIdentity& me, std::chrono::milliseconds timeout);

// The transports of one PE, made by plan (collective): the shared-memory one always (it holds
// this PE's own window), UCX where the plan says, and the router between them. With UCX, every
// wait in the process (common/backoff.hpp) drives the active transport's progress() between its
// looks and sleeps on UCX's event descriptor, from construction to destruction.
class Transports {
 public:
  // `heap` (the runtime's) outlives the transports: shared memory maps it for the peers, UCX
  // registers it.
  Transports(bootstrap::StoreCollectives& collectives, int rank, int size, const PeerPlan& plan,
             heap::SymmetricHeap& heap, const std::string& host, const UcxOptions& ucx,
             std::chrono::milliseconds timeout);
  ~Transports();
  Transports(const Transports&) = delete;
  Transports& operator=(const Transports&) = delete;

  // The one the SHMEM layer uses.
  Transport& active() { return *active_; }
  // The shared-memory transport (which program data turned out symmetric).
  ShmTransport& shm() { return *shm_; }

 private:
  static void drive(void* self);
  static void sleep_until_event(void* self, std::chrono::microseconds at_most);

  std::unique_ptr<ShmTransport> shm_;
  std::unique_ptr<UcxTransport> ucx_;
  std::unique_ptr<RoutedTransport> routed_;
  Transport* active_ = nullptr;
};

}  // namespace shmoe::transport
