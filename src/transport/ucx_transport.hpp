// The UCX transport: reaches the symmetric segments of PEs that this PE cannot map (another
// host, or every peer when SHMOE_TRANSPORT=ucx) with UCP one-sided operations. Each PE registers
// its segment, and publishes its worker address, segment base and packed remote key through the
// config store; puts, gets and atomics then name (pe, offset) like every transport.
//
// Channels: each context has its own endpoint to every peer, on the PE's one worker, so its
// quiet flushes its own endpoints and waits for nothing another context issued, while one
// progress engine (the waits and the progress thread) serves every context.
//
// Completion: a put is complete at the target only after a flush, and a peer's put into this PE
// lands only while this PE's worker progresses. So quiet() flushes the channel's endpoints,
// every wait in the process drives the worker (progress(), which Transports registers with
// set_wait_progress), and a progress thread drives it while the PE computes. Per peer and channel,
// operations behave as on shared memory: a get or fetching atomic first flushes the operations the
// channel still has in flight to that peer, so a put followed by a get of the same word reads what
// was put, as it does on one host. Non-fetching operations (shmem_p, atomic add/and/or/xor/set, the
// signal of a put-with-signal) are posted: the caller does not wait for the target.
//
// Batch sessions (ucx_batch.cpp): while a context is in one, its small puts and non-fetching
// atomics to each peer are held in one message per peer, which the peer checks and applies in
// order when it arrives and acknowledges; quiet and fence wait for the acknowledgements as they
// wait for flushes.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "bootstrap/config_store.hpp"
#include "transport/batch_records.hpp"
#include "transport/transport.hpp"
#include "transport/ucx_options.hpp"

namespace shmoe::transport {

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
  std::unique_ptr<Channel> open_channel() override;
  void put(Channel* ch, int pe, std::size_t offset, const void* src, std::size_t bytes) override;
  void get(Channel* ch, int pe, std::size_t offset, void* dst, std::size_t bytes) override;
  void put_nbi(Channel* ch, int pe, std::size_t offset, const void* src,
               std::size_t bytes) override;
  void get_nbi(Channel* ch, int pe, std::size_t offset, void* dst, std::size_t bytes) override;
  // Every block's put (get) is posted before the first is waited for: one round trip for the
  // transfer, not one per block.
  void put_blocks(Channel* ch, int pe, std::size_t offset, const void* src,
                  const Blocks& blocks) override;
  void get_blocks(Channel* ch, int pe, std::size_t offset, void* dst,
                  const Blocks& blocks) override;
  void put_value(Channel* ch, int pe, std::size_t offset, std::uint64_t bits,
                 std::size_t bytes) override;
  std::uint64_t fetch_atomic(Channel* ch, int pe, std::size_t offset,
                             const AmoRequest& request) override;
  void post_atomic(Channel* ch, int pe, std::size_t offset, const AmoRequest& request) override;
  // Not after a flush of the endpoint: a get given up on never holds the caller.
  std::unique_ptr<DetachedGet> get_detached(Channel* ch, int pe, std::size_t offset,
                                            std::size_t bytes) override;
  void put_signal(Channel* ch, int pe, std::size_t offset, const void* src, std::size_t bytes,
                  const SignalUpdate& signal, bool nbi) override;
  void fence(Channel* ch) override;
  void quiet(Channel* ch) override;
  // Flushes only the named PEs' endpoints (and settles the channel's held signals).
  void quiet_pes(Channel* ch, const int* pes, std::size_t n) override;
  void start_batch(Channel* ch) override;
  void stop_batch(Channel* ch) override;
  void complete_batches() override;

  // One pass of the worker's progress engine by one of the PE's own threads (a wait); true if
  // it did something.
  bool progress() override;
  // A wait's sleep (see set_wait_progress): returns when a message arrives or after `at_most`.
  void sleep_until_event(std::chrono::microseconds at_most);

  struct HeldSignal;
  // Posts a put-with-signal's signal once its data has landed (from the flush's completion), or
  // only settles it (`post` false: the flush failed for a lost peer).
  void post_signal_now(const HeldSignal& held, bool post = true);

 private:
  // What the store carried for each peer: enough to open more endpoints to it later.
  struct Remote {
    std::uint64_t base = 0;  // the peer's segment address in its own address space
    std::string worker_address;
    std::string rkey;
  };
  struct Endpoint {
    ucp_ep_h ep = nullptr;
    ucp_rkey_h rkey = nullptr;
    // Operations posted on this endpoint (counted once posted), and how many of them a flush
    // that completed covers: one may still be in flight while posted > flushed. Counts, not a
    // flag: a thread's quiet that finds another thread's flush under way must wait for its own.
    std::atomic<std::uint64_t> posted{0};
    std::atomic<std::uint64_t> flushed{0};
    // A batch session's message being filled for this peer (under the channel's batch_mutex),
    // whether it holds records (read without the lock as a hint), and the messages sent and
    // acknowledged as applied.
    batch::BatchWriter batch;
    std::atomic<bool> batch_held{false};
    std::uint64_t batches_sent = 0;  // under batch_mutex
    std::atomic<std::uint64_t> batches_applied{0};
    // This peer's share of the channel's held signals: a quiet of other PEs (shmem_pe_quiet) or a
    // get from another PE does not wait for them (a stopped peer may hold them for long).
    std::atomic<std::uint64_t> held_signals{0};
  };
  // One context's endpoints, and the signals of its put-with-signals that wait for their data
  // to land before they go (see put_signal).
  struct UcxChannel final : Channel {
    explicit UcxChannel(UcxTransport& t);
    ~UcxChannel() override;
    UcxTransport& owner;
    std::unique_ptr<Endpoint[]> endpoints;
    std::atomic<std::uint64_t> held_signals{0};
    std::uint64_t id = 0;  // names the channel in batch messages and their acknowledgements
    std::atomic<bool> batching{false};
    std::mutex batch_mutex;
    std::atomic<int> held{0};                 // endpoints whose batch holds records
    std::atomic<std::uint64_t> unapplied{0};  // messages sent and not yet acknowledged
  };

  // The constructor's steps: the UCP context, its worker, the segment's registration, this PE's
  // record for its peers (segment address, worker address, remote key) and the peers' records.
  void init_context();
  void create_worker();
  void map_segment();
  std::string own_record();
  void learn_peers(bootstrap::StoreCollectives& collectives, const std::string& mine,
                   const std::vector<bool>& reach, std::chrono::milliseconds timeout);

  UcxChannel& channel(Channel* ch) {
    return ch == nullptr ? *default_channel_ : *static_cast<UcxChannel*>(ch);
  }
  Endpoint& endpoint(UcxChannel& ch, int pe);
  ucs_status_ptr_t post_put(Endpoint& e, int pe, std::size_t offset, const void* src,
                            std::size_t bytes);
  ucs_status_ptr_t post_get(UcxChannel& ch, int pe, std::size_t offset, void* dst,
                            std::size_t bytes);
  // A 32- or 64-bit UCP atomic; returns the previous value.
  std::uint64_t native_atomic(UcxChannel& ch, int pe, std::size_t offset, ucp_atomic_op_t op,
                              unsigned width, std::uint64_t operand, std::uint64_t compare);
  // A 32- or 64-bit UCP atomic whose result nobody reads: ADD/AND/OR/XOR as UCP posts, SWAP and
  // CSWAP into a reply buffer that their completion frees.
  void posted_atomic(Endpoint& e, int pe, std::size_t offset, ucp_atomic_op_t op, unsigned width,
                     std::uint64_t operand, std::uint64_t compare);
  // 1- and 2-byte atomics: compare-and-swap on the aligned 32-bit word that contains them.
  std::uint64_t narrow_atomic(UcxChannel& ch, int pe, std::size_t offset,
                              const AmoRequest& request);
  void flush_if_in_flight(UcxChannel& ch, int pe);
  // Waits until every signal `ch` holds back has been posted (see put_signal), or only those to
  // the `n` PEs `pes` when not null.
  void settle_held_signals(UcxChannel& ch, const int* pes = nullptr, std::size_t n = 0);
  // Flushes every endpoint of `ch` that may have operations in flight, all at once.
  // Flushes the channel's endpoints to `pes` (nullptr: every PE) that have writes in flight,
  // every flush started before the first is waited for.
  void flush_channel(UcxChannel& ch, const int* pes = nullptr, std::size_t n = 0);
  // Waits for a request (nullptr or an error pointer: done), driving the worker and backing off;
  // a failure or a wait past the hang timeout stops the PE with `what` and the peer.
  void wait(ucs_status_ptr_t request, const char* what, int pe);
  // Posts post(i) for every block i, keeping at most a window of requests unfinished, and waits
  // for them all.
  template <typename Post>
  void post_blocks(std::size_t count, const char* what, int pe, Post&& post);
  // For an _nbi operation: frees the request (it completes by quiet) or reports its error.
  void release_nbi(ucs_status_ptr_t request, const char* what, int pe);
  void run_progress_thread();

  // Batch sessions (ucx_batch.cpp). The try_ forms hold the operation in the peer's message and
  // return true, or return false when the channel is not batching or the operation is too large.
  bool try_batch_put(UcxChannel& ch, int pe, std::size_t offset, const void* src,
                     std::size_t bytes);
  bool try_batch_atomic(UcxChannel& ch, int pe, std::size_t offset, const AmoRequest& request);
  bool try_batch_put_signal(UcxChannel& ch, int pe, std::size_t offset, const void* src,
                            std::size_t bytes, const SignalUpdate& signal);
  // Sends the message held for `pe`, if any, so that an operation that is not batched goes after
  // it; the _locked form with batch_mutex held.
  void send_batch(UcxChannel& ch, int pe);
  Endpoint& hold_room(UcxChannel& ch, int pe, std::size_t record_bytes);
  void send_batch_locked(UcxChannel& ch, int pe);
  // Sends the channel's messages to `pes` (nullptr: every PE) and waits until each peer has
  // applied every message this channel sent it.
  void complete_channel_batches(UcxChannel& ch, const int* pes = nullptr, std::size_t n = 0);
  // Sends every channel's held messages that no other thread is filling (every wait does this).
  void send_held_batches();
  // Counts the acknowledgements on_batch_applied queued (see acks_).
  void drain_acks();
  void register_batch_handlers();
  static ucs_status_t on_batch(void* self, const void* header, std::size_t header_length,
                               void* data, std::size_t length, const ucp_am_recv_param_t* param);
  static ucs_status_t on_batch_applied(void* self, const void* header, std::size_t header_length,
                                       void* data, std::size_t length,
                                       const ucp_am_recv_param_t* param);

  int rank_;
  int size_;
  std::byte* segment_;
  std::size_t segment_size_;
  std::size_t batch_put_max_;  // SHMOE_BATCH_PUT_MAX
  // Every open channel by id, for acknowledgements and for the waits that send held messages.
  std::mutex channels_mutex_;
  std::unordered_map<std::uint64_t, UcxChannel*> channels_;
  std::uint64_t next_channel_id_ = 0;  // under channels_mutex_
  std::atomic<int> held_batches_{0};   // endpoints whose batch holds records
  // Acknowledgements as they arrive: (channel id, PE that applied the message). The handler only
  // queues them, under a lock never held across a UCX call, because it runs inside UCX's worker
  // lock while the threads that send hold channels_mutex_ or a batch_mutex and then take it.
  std::mutex acks_mutex_;
  std::vector<std::pair<std::uint64_t, int>> acks_;
  // The reply buffer of a posted SWAP or CSWAP (UCP has no non-fetching form of either): it lives
  // until the operation completes, in progress, where the completion frees it. One to a lost PE
  // may never complete: the destructor frees what is left of discarded_ once the worker is gone.
  struct DiscardedReply {
    std::uint64_t value = 0;
    std::uint64_t reply = 0;
    int pe = -1;
    UcxTransport* owner = nullptr;
  };
  static void free_discarded_reply(void* request, ucs_status_t status, void* user_data);
  std::mutex discarded_mutex_;
  std::unordered_set<DiscardedReply*> discarded_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_mem_h memh_ = nullptr;
  int event_fd_ = -1;            // the worker's wake-up descriptor, -1 without wake-up support
  std::vector<Remote> remotes_;  // per PE; empty worker address: not reached through UCX
  std::unique_ptr<UcxChannel> default_channel_;
  std::thread progress_thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> driven_{0};  // calls of progress(): the PE is driving the worker
};

}  // namespace shmoe::transport
