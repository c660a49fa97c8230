// The UCX transport: reaches the symmetric segments of PEs that this PE cannot map (another
// host, or every peer when SHMOE_TRANSPORT=ucx) with UCP one-sided operations. Each PE registers
// its segment, and publishes its worker address, segment base and packed remote key through the
// config store; puts, gets and atomics then name (pe, offset) like every transport.
//
// Completion: a put is complete at the target only after a flush, and a peer's put into this PE
// lands only while this PE's worker progresses. So quiet() flushes the worker, every wait in the
// process drives the worker (set_wait_progress), and a progress thread drives it while the PE
// computes. Per peer, operations behave as on shared memory: a get or atomic first flushes the
// writes this PE still has in flight to that peer, so a put followed by a get of the same word
// reads what was put, as it does on one host.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/config_store.hpp"
#include "transport/transport.hpp"

namespace shmoe::transport {

struct UcxOptions {
  bool progress_thread = true;  // SHMOE_UCX_PROGRESS_THREAD
};

UcxOptions read_ucx_options();

class UcxTransport final : public Transport {
 public:
  // Collective over every PE of the job (the store exchange), even one that reaches no peer over
  // UCX. `segment`: this PE's symmetric segment; `reach[pe]`: whether PE pe is reached through
  // this transport (an endpoint is made only for those).
  UcxTransport(bootstrap::StoreCollectives& collectives, int rank, int size, std::byte* segment,
               std::size_t segment_size, const std::vector<bool>& reach,
               std::chrono::milliseconds timeout, const UcxOptions& options);
  ~UcxTransport() override;
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  std::string_view name() const override { return "ucx"; }
  std::byte* direct_base(int) const override { return nullptr; }
  void put(int pe, std::size_t offset, const void* src, std::size_t bytes) override;
  void get(int pe, std::size_t offset, void* dst, std::size_t bytes) override;
  void put_nbi(int pe, std::size_t offset, const void* src, std::size_t bytes) override;
  void get_nbi(int pe, std::size_t offset, void* dst, std::size_t bytes) override;
  std::uint64_t atomic(int pe, std::size_t offset, const AmoRequest& request) override;
  void fence() override;
  void quiet() override;

  // One pass of the worker's progress engine by one of the PE's own threads (a wait); true if
  // it did something.
  bool progress();
  // A wait's sleep (see set_wait_progress): returns when a message arrives or after `at_most`.
  void sleep_until_event(std::chrono::microseconds at_most);

 private:
  struct Peer {
    ucp_ep_h ep = nullptr;
    ucp_rkey_h rkey = nullptr;
    std::uint64_t base = 0;  // the peer's segment address in its own address space
    // A put or atomic to this peer may still be in flight (cleared by a flush).
    std::atomic<bool> writes_in_flight{false};
  };

  Peer& peer(int pe);
  ucs_status_ptr_t post_put(int pe, std::size_t offset, const void* src, std::size_t bytes);
  ucs_status_ptr_t post_get(int pe, std::size_t offset, void* dst, std::size_t bytes);
  // A 32- or 64-bit UCP atomic; returns the previous value.
  std::uint64_t native_atomic(int pe, std::size_t offset, ucp_atomic_op_t op, unsigned width,
                              std::uint64_t operand, std::uint64_t compare);
  // 1- and 2-byte atomics: compare-and-swap on the aligned 32-bit word that contains them.
  std::uint64_t narrow_atomic(int pe, std::size_t offset, const AmoRequest& request);
  void flush_peer_if_written(int pe);
  // Waits for a request (nullptr or an error pointer: done), driving the worker and backing off;
  // a failure or a wait past the hang timeout stops the PE with `what` and the peer.
  void wait(ucs_status_ptr_t request, const char* what, int pe);
  // For an _nbi operation: frees the request (it completes by quiet) or reports its error.
  void release_nbi(ucs_status_ptr_t request, const char* what, int pe);
  void run_progress_thread();

  int rank_;
  int size_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_mem_h memh_ = nullptr;
  int event_fd_ = -1;  // the worker's wake-up descriptor, -1 without wake-up support
  std::unique_ptr<Peer[]> peers_;
  std::thread progress_thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> driven_{0};  // calls of progress(): the PE is driving the worker
};

}  // namespace shmoe::transport
