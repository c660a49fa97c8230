#include "transport/ucx_transport.hpp"

#include <poll.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/backoff.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "common/pe_loss.hpp"
#include "common/settings.hpp"
#include "transport/narrow_atomic.hpp"
#include "transport/start_record.hpp"

namespace shmoe::transport {
namespace {

void check(ucs_status_t status, const char* what) {
  if (status != UCS_OK) throw make_error("UCX: {} failed: {}", what, ucs_status_string(status));
}

}  // namespace

UcxOptions read_ucx_options() {
  UcxOptions o;
  o.progress_thread = settings::ucx_progress_thread() != 0;
  return o;
}

UcxTransport::UcxTransport(bootstrap::StoreCollectives& collectives, int rank, int size,
                           std::byte* segment, std::size_t segment_size,
                           const std::vector<bool>& reach, std::chrono::milliseconds timeout,
                           const UcxOptions& options)
    : rank_(rank),
      size_(size),
      segment_(segment),
      segment_size_(segment_size),
      batch_put_max_(static_cast<std::size_t>(settings::batch_put_max())),
      remotes_(size) {
  init_context();
  create_worker();
  map_segment();
  learn_peers(collectives, own_record(), reach, timeout);
  default_channel_ = std::make_unique<UcxChannel>(*this);
  // After the default channel, which acknowledges batches, and before anything progresses.
  register_batch_handlers();
  if (options.progress_thread) progress_thread_ = std::thread([this] { run_progress_thread(); });
}

void UcxTransport::init_context() {
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  // WAKEUP lets the progress thread and sleeping waits block until a message comes.
  // AM carries batch sessions' messages and their acknowledgements (ucx_batch.cpp).
  params.features =
      UCP_FEATURE_RMA | UCP_FEATURE_AMO32 | UCP_FEATURE_AMO64 | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  ucp_config_t* config = nullptr;
  check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
  const ucs_status_t init = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  check(init, "ucp_init");
}

void UcxTransport::create_worker() {
  // Several threads of a PE (the MoE workers, the copy engine, the progress thread) use the one
  // worker, so it must serialise them itself.
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_MULTI;
  check(ucp_worker_create(context_, &wp, &worker_), "ucp_worker_create");
  ucp_worker_attr_t wattr{};
  wattr.field_mask = UCP_WORKER_ATTR_FIELD_THREAD_MODE;
  check(ucp_worker_query(worker_, &wattr), "ucp_worker_query");
  if (wattr.thread_mode != UCS_THREAD_MODE_MULTI) {
    throw make_error("UCX: this UCX build does not support multi-threaded workers");
  }
  if (ucp_worker_get_efd(worker_, &event_fd_) != UCS_OK) event_fd_ = -1;
}

void UcxTransport::map_segment() {
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = segment_;
  mp.length = segment_size_;
  check(ucp_mem_map(context_, &mp, &memh_), "ucp_mem_map of the symmetric segment");
}

std::string UcxTransport::own_record() {
  std::string mine;
  ucp_address_t* address = nullptr;
  std::size_t address_bytes = 0;
  check(ucp_worker_get_address(worker_, &address, &address_bytes), "ucp_worker_get_address");
  void* rkey = nullptr;
  std::size_t rkey_bytes = 0;
  const ucs_status_t packed = ucp_rkey_pack(context_, memh_, &rkey, &rkey_bytes);
  if (packed == UCS_OK) {
    mine = encode_record([&](Writer& w) {
      w.i64(static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(segment_)));
      w.str({reinterpret_cast<const char*>(address), address_bytes});
      w.str({static_cast<const char*>(rkey), rkey_bytes});
    });
    ucp_rkey_buffer_release(rkey);
  }
  ucp_worker_release_address(worker_, address);
  check(packed, "ucp_rkey_pack");
  return mine;
}

void UcxTransport::learn_peers(bootstrap::StoreCollectives& collectives, const std::string& mine,
                               const std::vector<bool>& reach, std::chrono::milliseconds timeout) {
  // The only way a worker address or a remote key reaches this PE: every record of this
  // allgather was written through the config store by a connection that proved the job key, and
  // this PE's own connection checked that the store knows the key too (bootstrap/store_auth.hpp),
  // so endpoints and keys come from PEs of this job only; one record per rank, checked by the
  // allgather. (UCX does not authenticate peers itself: a process that reaches this worker's
  // transport directly is outside what the key protects; see docs/openshmem.md#security.)
  auto records = collectives.allgather("ucx-peers", mine, timeout);
  for (int pe = 0; pe < size_; ++pe) {
    if (!reach[pe] || pe == rank_) continue;
    remotes_[pe] = decode_record(records[pe], pe, "UCX", [](Reader& r) {
      Remote remote;
      remote.base = static_cast<std::uint64_t>(r.i64());
      remote.worker_address = std::string(r.str());
      remote.rkey = std::string(r.str());
      if (remote.worker_address.empty()) throw bootstrap::wire::WireError("no worker address");
      return remote;
    });
  }
}

UcxTransport::~UcxTransport() {
  stopping_ = true;
  if (progress_thread_.joinable()) {
    ucp_worker_signal(worker_);
    progress_thread_.join();
  }
  // Every operation was completed by finalize's barrier; the default endpoints close without
  // waiting for the peer, which may already have gone.
  default_channel_.reset();
  if (memh_ != nullptr) ucp_mem_unmap(context_, memh_);
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
  for (DiscardedReply* r : discarded_) delete r;
}

// Drives the worker only while this PE's own threads do not: a PE that waits drives it from its
// wait loop (progress()), and a second thread taking the worker's lock and the wake-ups then only
// costs context switches (measured on 2 cores with 4 PEs: collectives 15-30x slower). So every
// kCheck the thread looks whether progress() ran meanwhile; if not, the PE is computing or idle,
// and the thread drives the worker and then sleeps on its event descriptor until a message comes
// (or kCheck passes, if a transport raises no events). Operations aimed at a computing PE thus
// wait at most about kCheck.
void UcxTransport::run_progress_thread() {
  constexpr auto kCheck = std::chrono::milliseconds(1);
  while (!stopping_.load(std::memory_order_acquire)) {
    const std::uint64_t before = driven_.load(std::memory_order_relaxed);
    std::this_thread::sleep_for(kCheck);
    if (driven_.load(std::memory_order_relaxed) != before) continue;
    while (!stopping_.load(std::memory_order_relaxed)) {
      while (ucp_worker_progress(worker_) != 0) {
      }
      if (event_fd_ < 0 || ucp_worker_arm(worker_) == UCS_ERR_BUSY) break;
      pollfd fd{event_fd_, POLLIN, 0};
      if (::poll(&fd, 1, static_cast<int>(kCheck.count())) <= 0) break;
      if (driven_.load(std::memory_order_relaxed) != before) break;  // the PE drives it again
    }
  }
}

void UcxTransport::sleep_until_event(std::chrono::microseconds at_most) {
  driven_.fetch_add(1, std::memory_order_relaxed);
  const timespec timeout{static_cast<time_t>(at_most.count() / 1'000'000),
                         static_cast<long>(at_most.count() % 1'000'000) * 1000};
  if (event_fd_ < 0) {
    nanosleep(&timeout, nullptr);
    return;
  }
  if (ucp_worker_arm(worker_) == UCS_ERR_BUSY) return;  // messages are waiting: progress them
  pollfd fd{event_fd_, POLLIN, 0};
  ::ppoll(&fd, 1, &timeout, nullptr);
}

// Every wait and test comes here, so a batch session's held messages go out whenever the PE
// waits for anything.
bool UcxTransport::progress() {
  driven_.fetch_add(1, std::memory_order_relaxed);
  if (held_batches_.load(std::memory_order_relaxed) != 0) send_held_batches();
  return ucp_worker_progress(worker_) != 0;
}

UcxTransport::UcxChannel::UcxChannel(UcxTransport& t)
    : owner(t), endpoints(std::make_unique<Endpoint[]>(t.size_)) {
  {
    std::lock_guard lock(t.channels_mutex_);
    id = t.next_channel_id_++;
    t.channels_.emplace(id, this);
  }
  for (int pe = 0; pe < t.size_; ++pe) {
    const Remote& r = t.remotes_[pe];
    if (r.worker_address.empty()) continue;
    Endpoint& e = endpoints[pe];
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep.address = reinterpret_cast<const ucp_address_t*>(r.worker_address.data());
    check(ucp_ep_create(t.worker_, &ep, &e.ep), "ucp_ep_create");
    check(ucp_ep_rkey_unpack(e.ep, r.rkey.data(), &e.rkey), "ucp_ep_rkey_unpack");
  }
}

// Remote keys go before their endpoints. The caller has completed the channel's operations (a
// context's destroy quiets it; the PE's own channel closes after finalize's barrier), so the
// endpoints close without waiting for the peer, which may already have gone.
UcxTransport::UcxChannel::~UcxChannel() {
  {
    std::lock_guard lock(owner.channels_mutex_);
    owner.channels_.erase(id);
  }
  for (int pe = 0; pe < owner.size_; ++pe) {
    Endpoint& e = endpoints[pe];
    if (e.rkey != nullptr) ucp_rkey_destroy(e.rkey);
    if (e.ep == nullptr) continue;
    ucp_request_param_t prm{};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t request = ucp_ep_close_nbx(e.ep, &prm);
    if (UCS_PTR_IS_PTR(request)) {
      while (ucp_request_check_status(request) == UCS_INPROGRESS)
        ucp_worker_progress(owner.worker_);
      ucp_request_free(request);
    }
  }
}

std::unique_ptr<Channel> UcxTransport::open_channel() {
  return std::make_unique<UcxChannel>(*this);
}

UcxTransport::Endpoint& UcxTransport::endpoint(UcxChannel& ch, int pe) {
  Endpoint& e = ch.endpoints[pe];
  if (e.ep == nullptr) [[unlikely]] {
    log::fatal(fmt::format("UCX transport: PE {} has no endpoint (internal routing error)", pe));
  }
  return e;
}

namespace {

// A PE the store declared lost (SHMOE_PE_LOSS=continue) never answers again. A put, atomic update
// (no reply wanted) or flush to it is dropped (its data was for it alone), so the others go on; a
// get or a fetch from it is dropped where this thread handles lost PEs (shrink-mode MoE leaves
// the lost PE's rows out), and otherwise stops the PE naming the lost one, at once.
bool drop_for_lost_pe(const char* what, int pe) {
  if (pe < 0 || !pe_lost(pe)) return false;
  if (std::strncmp(what, "put", 3) == 0 || std::strncmp(what, "flush", 5) == 0 ||
      std::strcmp(what, "atomic update") == 0)
    return true;
  fail_if_waiting_for_lost_pe(WaitState{fmt::format("UCX {}", what),
                                        fmt::format("UCX {} with PE {}", what, pe), pe, 1, 0, 0});
  return true;
}

// A transfer to a PE that just died may fail (connection reset) before the store's notice comes:
// under SHMOE_PE_LOSS=continue the notice is awaited, a few seconds at most, before the error
// stops this PE.
bool failed_for_lost_pe(const char* what, int pe) {
  if (pe < 0 || !watch_lost_pes()) return false;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!pe_lost(pe) && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return drop_for_lost_pe(what, pe);
}

}  // namespace

void UcxTransport::wait(ucs_status_ptr_t request, const char* what, int pe) {
  if (request == nullptr) return;
  if (UCS_PTR_IS_ERR(request)) {
    if (failed_for_lost_pe(what, pe)) return;
    log::fatal(fmt::format("UCX {} with PE {} failed: {}", what, pe,
                           ucs_status_string(UCS_PTR_STATUS(request))));
  }
  Backoff backoff;
  ucs_status_t status;
  while ((status = ucp_request_check_status(request)) == UCS_INPROGRESS) {
    if (progress()) continue;
    if (drop_for_lost_pe(what, pe)) {
      ucp_request_free(request);  // released by UCX when it ends
      return;
    }
    if (backoff.pause()) {
      report_hang(
          WaitState{fmt::format("UCX {}", what),
                    fmt::format("UCX {} with PE {} (the peer's worker must progress)", what, pe),
                    pe, 1, 0, 0},
          backoff.waited());
    }
  }
  ucp_request_free(request);
  if (status != UCS_OK) {
    if (failed_for_lost_pe(what, pe)) return;
    log::fatal(fmt::format("UCX {} with PE {} failed: {}", what, pe, ucs_status_string(status)));
  }
}

namespace {

// Counted after the post: a flush started once the count is seen is ordered after the operation.
void note_posted(std::atomic<std::uint64_t>& posted) {
  posted.fetch_add(1, std::memory_order_acq_rel);
}

// The posted count that a flush started now covers, or 0 when every operation is covered.
std::uint64_t unflushed(const std::atomic<std::uint64_t>& posted,
                        const std::atomic<std::uint64_t>& flushed) {
  const std::uint64_t p = posted.load(std::memory_order_acquire);
  return p > flushed.load(std::memory_order_acquire) ? p : 0;
}

void note_flushed(std::atomic<std::uint64_t>& flushed, std::uint64_t covered) {
  std::uint64_t f = flushed.load(std::memory_order_acquire);
  while (f < covered && !flushed.compare_exchange_weak(f, covered, std::memory_order_acq_rel)) {
  }
}

}  // namespace

ucs_status_ptr_t UcxTransport::post_put(Endpoint& e, int pe, std::size_t offset, const void* src,
                                        std::size_t bytes) {
  ucp_request_param_t prm{};
  ucs_status_ptr_t request =
      ucp_put_nbx(e.ep, src, bytes, remotes_[pe].base + offset, e.rkey, &prm);
  note_posted(e.posted);
  return request;
}

ucs_status_ptr_t UcxTransport::post_get(UcxChannel& ch, int pe, std::size_t offset, void* dst,
                                        std::size_t bytes) {
  flush_if_in_flight(ch, pe);
  Endpoint& e = endpoint(ch, pe);
  ucp_request_param_t prm{};
  return ucp_get_nbx(e.ep, dst, bytes, remotes_[pe].base + offset, e.rkey, &prm);
}

// A put's request completes when `src` may be reused; arrival at the target takes a flush.
void UcxTransport::put(Channel* ch, int pe, std::size_t offset, const void* src,
                       std::size_t bytes) {
  if (bytes == 0) return;
  UcxChannel& c = channel(ch);
  if (try_batch_put(c, pe, offset, src, bytes)) return;
  send_batch(c, pe);
  wait(post_put(endpoint(c, pe), pe, offset, src, bytes), "put", pe);
}

void UcxTransport::get(Channel* ch, int pe, std::size_t offset, void* dst, std::size_t bytes) {
  if (bytes == 0) return;
  wait(post_get(channel(ch), pe, offset, dst, bytes), "get", pe);
}

// A window bounds the requests a transfer of many small blocks holds at once (UCX allocates
// each from its pool); it is wide enough that the wait for the first finds it long done.
template <typename Post>
void UcxTransport::post_blocks(std::size_t count, const char* what, int pe, Post&& post) {
  constexpr std::size_t kWindow = 256;
  std::vector<ucs_status_ptr_t> pending;
  pending.reserve(std::min(count, kWindow));
  for (std::size_t i = 0; i < count; ++i) {
    ucs_status_ptr_t request = post(i);
    if (request == nullptr) continue;                      // done at once (UCX copied a small put)
    if (UCS_PTR_IS_ERR(request)) wait(request, what, pe);  // reports the error and stops the PE
    pending.push_back(request);
    if (pending.size() == kWindow) {
      for (ucs_status_ptr_t r : pending) wait(r, what, pe);
      pending.clear();
    }
  }
  for (ucs_status_ptr_t r : pending) wait(r, what, pe);
}

void UcxTransport::put_blocks(Channel* ch, int pe, std::size_t offset, const void* src,
                              const Blocks& blocks) {
  if (blocks.block_bytes == 0) return;
  UcxChannel& c = channel(ch);
  send_batch(c, pe);
  Endpoint& e = endpoint(c, pe);
  const auto* from = static_cast<const std::byte*>(src);
  post_blocks(blocks.count, "put", pe, [&](std::size_t i) {
    return post_put(e, pe, offset + i * blocks.remote_stride, from + i * blocks.local_stride,
                    blocks.block_bytes);
  });
}

void UcxTransport::get_blocks(Channel* ch, int pe, std::size_t offset, void* dst,
                              const Blocks& blocks) {
  if (blocks.block_bytes == 0 || blocks.count == 0) return;
  UcxChannel& c = channel(ch);
  flush_if_in_flight(c, pe);  // once for the transfer: its gets then only read
  Endpoint& e = endpoint(c, pe);
  auto* to = static_cast<std::byte*>(dst);
  post_blocks(blocks.count, "get", pe, [&](std::size_t i) {
    ucp_request_param_t prm{};
    return ucp_get_nbx(e.ep, to + i * blocks.local_stride, blocks.block_bytes,
                       remotes_[pe].base + offset + i * blocks.remote_stride, e.rkey, &prm);
  });
}

// Freed requests still complete; quiet()'s flush waits for them. An error is reported at once.
void UcxTransport::release_nbi(ucs_status_ptr_t request, const char* what, int pe) {
  if (UCS_PTR_IS_PTR(request)) {
    ucp_request_free(request);
  } else if (UCS_PTR_IS_ERR(request)) {
    wait(request, what, pe);
  }
}

void UcxTransport::put_nbi(Channel* ch, int pe, std::size_t offset, const void* src,
                           std::size_t bytes) {
  if (bytes == 0) return;
  UcxChannel& c = channel(ch);
  if (try_batch_put(c, pe, offset, src, bytes)) return;
  send_batch(c, pe);
  release_nbi(post_put(endpoint(c, pe), pe, offset, src, bytes), "put_nbi", pe);
}

void UcxTransport::get_nbi(Channel* ch, int pe, std::size_t offset, void* dst, std::size_t bytes) {
  if (bytes == 0) return;
  UcxChannel& c = channel(ch);
  ucs_status_ptr_t request = post_get(c, pe, offset, dst, bytes);
  note_posted(endpoint(c, pe).posted);  // quiet completes it
  release_nbi(request, "get_nbi", pe);
}

namespace {

// What a detached get's request and its caller share: the buffer lives until both let go.
struct Landing {
  std::vector<std::byte> data;
  std::atomic<DetachedGet::State> state{DetachedGet::State::kInFlight};
};

class UcxDetachedGet final : public DetachedGet {
 public:
  explicit UcxDetachedGet(std::shared_ptr<Landing> landing) : landing_(std::move(landing)) {}
  State state() const override { return landing_->state.load(std::memory_order_acquire); }
  const std::byte* data() const override { return landing_->data.data(); }

 private:
  std::shared_ptr<Landing> landing_;
};

void land_detached_get(void* request, ucs_status_t status, void* user_data) {
  const std::unique_ptr<std::shared_ptr<Landing>> landing(
      static_cast<std::shared_ptr<Landing>*>(user_data));
  (*landing)->state.store(
      status == UCS_OK ? DetachedGet::State::kDone : DetachedGet::State::kFailed,
      std::memory_order_release);
  ucp_request_free(request);
}

}  // namespace

std::unique_ptr<DetachedGet> UcxTransport::get_detached(Channel* ch, int pe, std::size_t offset,
                                                        std::size_t bytes) {
  Endpoint& e = endpoint(channel(ch), pe);
  auto landing = std::make_shared<Landing>();
  landing->data.resize(bytes);
  auto for_request = std::make_unique<std::shared_ptr<Landing>>(landing);
  ucp_request_param_t prm{};
  prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  prm.cb.send = &land_detached_get;
  prm.user_data = for_request.get();
  ucs_status_ptr_t request =
      ucp_get_nbx(e.ep, landing->data.data(), bytes, remotes_[pe].base + offset, e.rkey, &prm);
  if (UCS_PTR_IS_PTR(request)) {
    for_request.release();  // the callback owns it now
  } else {
    landing->state.store(UCS_PTR_IS_ERR(request) ? DetachedGet::State::kFailed
                                                 : DetachedGet::State::kDone);
  }
  return std::make_unique<UcxDetachedGet>(std::move(landing));
}

// The value goes out of this stack frame: UCX copies a put this small before it returns (a
// request, if it ever gives one, completes once the copy is made, not at the target).
void UcxTransport::put_value(Channel* ch, int pe, std::size_t offset, std::uint64_t bits,
                             std::size_t bytes) {
  UcxChannel& c = channel(ch);
  if (try_batch_put(c, pe, offset, &bits, bytes)) return;
  send_batch(c, pe);
  wait(post_put(endpoint(c, pe), pe, offset, &bits, bytes), "put", pe);
}

// A batch session's held writes to `pe` go first and are waited for: what reads the peer next
// must see them.
void UcxTransport::flush_if_in_flight(UcxChannel& ch, int pe) {
  complete_channel_batches(ch, &pe, 1);
  settle_held_signals(ch, &pe, 1);
  Endpoint& e = endpoint(ch, pe);
  const std::uint64_t covered = unflushed(e.posted, e.flushed);
  if (covered == 0) return;
  ucp_request_param_t prm{};
  wait(ucp_ep_flush_nbx(e.ep, &prm), "flush", pe);
  note_flushed(e.flushed, covered);
}

// Every endpoint's flush is started before the first is waited for, so a quiet over many peers
// costs one round trip, not one per peer.
void UcxTransport::flush_channel(UcxChannel& ch, const int* pes, std::size_t n) {
  complete_channel_batches(ch, pes, n);
  settle_held_signals(ch, pes, n);
  struct Flush {
    int pe;
    std::uint64_t covered;
    ucs_status_ptr_t request;
  };
  std::vector<Flush> flushes;
  const std::size_t count = pes == nullptr ? static_cast<std::size_t>(size_) : n;
  for (std::size_t i = 0; i < count; ++i) {
    const int pe = pes == nullptr ? static_cast<int>(i) : pes[i];
    Endpoint& e = ch.endpoints[pe];
    const std::uint64_t covered = e.ep == nullptr ? 0 : unflushed(e.posted, e.flushed);
    if (covered == 0) continue;
    ucp_request_param_t prm{};
    flushes.push_back({pe, covered, ucp_ep_flush_nbx(e.ep, &prm)});
  }
  for (const Flush& f : flushes) {
    wait(f.request, "flush", f.pe);
    note_flushed(ch.endpoints[f.pe].flushed, f.covered);
  }
}

std::uint64_t UcxTransport::native_atomic(UcxChannel& ch, int pe, std::size_t offset,
                                          ucp_atomic_op_t op, unsigned width, std::uint64_t operand,
                                          std::uint64_t compare) {
  flush_if_in_flight(ch, pe);
  Endpoint& e = endpoint(ch, pe);
  // UCP's CSWAP takes the compare value in the buffer and the new value in the reply buffer,
  // which receives the old value; the other operations take their operand in the buffer.
  const bool cswap = op == UCP_ATOMIC_OP_CSWAP;
  std::uint64_t value64 = cswap ? compare : operand, reply64 = cswap ? operand : 0;
  std::uint32_t value32 = static_cast<std::uint32_t>(value64),
                reply32 = static_cast<std::uint32_t>(reply64);
  ucp_request_param_t prm{};
  prm.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER;
  prm.datatype = ucp_dt_make_contig(width);
  prm.reply_buffer = width == 8 ? static_cast<void*>(&reply64) : static_cast<void*>(&reply32);
  const void* value = width == 8 ? static_cast<const void*>(&value64) : &value32;
  wait(ucp_atomic_op_nbx(e.ep, op, value, 1, remotes_[pe].base + offset, e.rkey, &prm), "atomic",
       pe);
  return width == 8 ? reply64 : reply32;
}

// A request freed by its owner gets no callback, so the callbacks free their requests.
void UcxTransport::free_discarded_reply(void* request, ucs_status_t status, void* user_data) {
  auto* held = static_cast<DiscardedReply*>(user_data);
  const int pe = held->pe;
  {
    std::lock_guard lock(held->owner->discarded_mutex_);
    held->owner->discarded_.erase(held);
  }
  delete held;
  ucp_request_free(request);
  if (status != UCS_OK && !failed_for_lost_pe("atomic update", pe)) {
    log::fatal(fmt::format("UCX posted atomic failed: {}", ucs_status_string(status)));
  }
}

void UcxTransport::posted_atomic(Endpoint& e, int pe, std::size_t offset, ucp_atomic_op_t op,
                                 unsigned width, std::uint64_t operand, std::uint64_t compare) {
  ucp_request_param_t prm{};
  prm.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
  prm.datatype = ucp_dt_make_contig(width);
  const std::uint64_t address = remotes_[pe].base + offset;
  if (op != UCP_ATOMIC_OP_SWAP && op != UCP_ATOMIC_OP_CSWAP) {
    // UCP copies the operand before it returns; without a reply buffer the operation is a post.
    std::uint64_t value64 = operand;
    std::uint32_t value32 = static_cast<std::uint32_t>(operand);
    const void* value = width == 8 ? static_cast<const void*>(&value64) : &value32;
    ucs_status_ptr_t request = ucp_atomic_op_nbx(e.ep, op, value, 1, address, e.rkey, &prm);
    note_posted(e.posted);
    release_nbi(request, "atomic update", pe);
    return;
  }
  auto* held = new DiscardedReply;
  held->owner = this;
  {
    std::lock_guard lock(discarded_mutex_);
    discarded_.insert(held);
  }
  const bool cswap = op == UCP_ATOMIC_OP_CSWAP;
  held->value = cswap ? compare : operand;
  held->reply = cswap ? operand : 0;
  held->pe = pe;
  if (width == 4) {  // the 32-bit operands sit in the first half of each word (little-endian)
    held->value = static_cast<std::uint32_t>(held->value);
    held->reply = static_cast<std::uint32_t>(held->reply);
  }
  prm.op_attr_mask |=
      UCP_OP_ATTR_FIELD_REPLY_BUFFER | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  prm.reply_buffer = &held->reply;
  prm.cb.send = &free_discarded_reply;
  prm.user_data = held;
  ucs_status_ptr_t request = ucp_atomic_op_nbx(e.ep, op, &held->value, 1, address, e.rkey, &prm);
  note_posted(e.posted);
  if (UCS_PTR_IS_PTR(request)) return;  // the callback frees both
  {                                     // done (or failed) at once: no callback comes
    std::lock_guard lock(discarded_mutex_);
    discarded_.erase(held);
  }
  delete held;
  if (UCS_PTR_IS_ERR(request)) wait(request, "atomic update", pe);
}
std::uint64_t UcxTransport::narrow_atomic(UcxChannel& ch, int pe, std::size_t offset,
                                          const AmoRequest& r) {
  const std::size_t word = offset & ~std::size_t{3};
  const auto old =
      static_cast<std::uint32_t>(native_atomic(ch, pe, word, UCP_ATOMIC_OP_ADD, 4, 0, 0));
  return transport::narrow_atomic(static_cast<unsigned>(offset - word), r, old,
                                  [&](std::uint32_t desired, std::uint32_t expected) {
                                    return static_cast<std::uint32_t>(native_atomic(
                                        ch, pe, word, UCP_ATOMIC_OP_CSWAP, 4, desired, expected));
                                  });
}

namespace {

ucp_atomic_op_t ucp_op(AmoOp op) {
  switch (op) {
    case AmoOp::kLoad:  // fetch-and-add of 0
    case AmoOp::kAdd:
      return UCP_ATOMIC_OP_ADD;
    case AmoOp::kStore:
    case AmoOp::kSwap:
      return UCP_ATOMIC_OP_SWAP;
    case AmoOp::kCompareSwap:
      return UCP_ATOMIC_OP_CSWAP;
    case AmoOp::kAnd:
      return UCP_ATOMIC_OP_AND;
    case AmoOp::kOr:
      return UCP_ATOMIC_OP_OR;
    case AmoOp::kXor:
      return UCP_ATOMIC_OP_XOR;
  }
  return UCP_ATOMIC_OP_ADD;
}

void check_width(const AmoRequest& r) {
  if (r.width != 1 && r.width != 2 && r.width != 4 && r.width != 8) {
    throw make_error("atomic of width {} bytes is not supported (1, 2, 4 or 8)", r.width);
  }
}

}  // namespace

std::uint64_t UcxTransport::fetch_atomic(Channel* ch, int pe, std::size_t offset,
                                         const AmoRequest& r) {
  check_width(r);
  UcxChannel& c = channel(ch);
  if (r.width == 1 || r.width == 2) return narrow_atomic(c, pe, offset, r);
  const std::uint64_t operand = r.op == AmoOp::kLoad ? 0 : r.operand;
  return native_atomic(c, pe, offset, ucp_op(r.op), r.width, operand, r.compare);
}

// 1- and 2-byte words need the result of their compare-and-swap loop, so they stay fetching.
void UcxTransport::post_atomic(Channel* ch, int pe, std::size_t offset, const AmoRequest& r) {
  check_width(r);
  UcxChannel& c = channel(ch);
  if (try_batch_atomic(c, pe, offset, r)) return;
  if (r.op == AmoOp::kLoad || r.width == 1 || r.width == 2) {
    fetch_atomic(ch, pe, offset, r);
    return;
  }
  send_batch(c, pe);
  posted_atomic(endpoint(c, pe), pe, offset, ucp_op(r.op), r.width, r.operand, r.compare);
}

// A signal held until its data has landed: the endpoint's flush, started right after the data,
// completes in progress and posts the signal from there. The caller never waits for the
// target, and signals of successive calls overlap; the channel's quiet waits for held signals
// before it flushes, and so do its fence and its fetching operations. (UCX's own fence would not
// do: it orders operations of one lane only, and puts and atomics may travel on different lanes,
// e.g. shared memory and TCP.)
struct UcxTransport::HeldSignal {
  UcxTransport* transport;
  UcxChannel* channel;
  int pe;
  SignalUpdate signal;
};

namespace {

template <typename Held>
void post_held_signal(void* request, ucs_status_t status, void* user_data) {
  std::unique_ptr<Held> held(static_cast<Held*>(user_data));
  ucp_request_free(request);
  if (status != UCS_OK) {
    // A peer lost meanwhile (SHMOE_PE_LOSS=continue) gets no signal, as its data did not land:
    // a wait for it ends as a wait for a lost PE does.
    if (!watch_lost_pes()) {
      log::fatal(fmt::format("UCX flush before a signal to PE {} failed: {}", held->pe,
                             ucs_status_string(status)));
    }
    held->transport->post_signal_now(*held, false);
    return;
  }
  held->transport->post_signal_now(*held);
}

}  // namespace

void UcxTransport::post_signal_now(const HeldSignal& held, bool post) {
  Endpoint& e = held.channel->endpoints[held.pe];
  if (post) {
    posted_atomic(e, held.pe, held.signal.offset,
                  held.signal.add ? UCP_ATOMIC_OP_ADD : UCP_ATOMIC_OP_SWAP, 8, held.signal.value,
                  0);
  }
  e.held_signals.fetch_sub(1, std::memory_order_release);
  held.channel->held_signals.fetch_sub(1, std::memory_order_release);
}

void UcxTransport::put_signal(Channel* ch, int pe, std::size_t offset, const void* src,
                              std::size_t bytes, const SignalUpdate& signal, bool nbi) {
  UcxChannel& c = channel(ch);
  if (try_batch_put_signal(c, pe, offset, src, bytes, signal)) return;
  send_batch(c, pe);
  Endpoint& e = endpoint(c, pe);
  if (bytes > 0) {
    ucs_status_ptr_t request = post_put(e, pe, offset, src, bytes);
    if (nbi) {
      release_nbi(request, "put_signal_nbi", pe);
    } else {
      wait(request, "put_signal", pe);
    }
  }
  c.held_signals.fetch_add(1, std::memory_order_relaxed);
  e.held_signals.fetch_add(1, std::memory_order_relaxed);
  auto held = std::make_unique<HeldSignal>(HeldSignal{this, &c, pe, signal});
  // The flush below covers the data (a quiet waits for it through held_signals).
  note_flushed(e.flushed, e.posted.load(std::memory_order_acquire));
  ucp_request_param_t prm{};
  prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  prm.cb.send = &post_held_signal<HeldSignal>;
  prm.user_data = held.get();
  ucs_status_ptr_t flush = ucp_ep_flush_nbx(e.ep, &prm);
  if (UCS_PTR_IS_PTR(flush)) {
    held.release();  // the callback owns it now
    return;
  }
  if (UCS_PTR_IS_ERR(flush)) wait(flush, "flush before a signal", pe);
  post_signal_now(*held);
}

// UCX's own fence only orders operations that share a lane (see put_signal): flushing every
// endpoint this channel used since the last flush, held signals first, orders them whatever the
// lanes.
void UcxTransport::fence(Channel* ch) {
  flush_channel(channel(ch));
}

void UcxTransport::quiet(Channel* ch) {
  flush_channel(channel(ch));
}

void UcxTransport::quiet_pes(Channel* ch, const int* pes, std::size_t n) {
  flush_channel(channel(ch), pes, n);
}

void UcxTransport::settle_held_signals(UcxChannel& ch, const int* pes, std::size_t n) {
  auto held = [&] {
    if (pes == nullptr) return ch.held_signals.load(std::memory_order_acquire);
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < n; ++i)
      sum += ch.endpoints[pes[i]].held_signals.load(std::memory_order_acquire);
    return sum;
  };
  Backoff backoff;
  while (held() != 0) {
    if (progress()) continue;
    if (backoff.pause()) {
      report_hang(
          WaitState{"UCX signal", "UCX: signals waiting for their data to land", rank_, 1, 0, 0},
          backoff.waited());
    }
  }
}

}  // namespace shmoe::transport
