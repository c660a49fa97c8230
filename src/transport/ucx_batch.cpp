// Batch sessions over UCX (OpenSHMEM 1.6 section 9.9): while a context is in one, its small puts
// (up to SHMOE_BATCH_PUT_MAX bytes), its non-fetching atomics and its small put-with-signals to a
// peer are appended, in issue order, to one message per peer (batch_records.hpp) instead of each
// being one UCP operation. The message goes as one UCP active message when it fills, before any
// operation to that peer that is not held back, at a fence or quiet, at session stop, and whenever
// the PE waits or tests (progress()). The peer checks the whole message, applies it in order from
// its worker's progress, and acknowledges it; a fence or quiet, and a get or fetching atomic to
// that peer, wait for the acknowledgements as they wait for a flush. So completion and ordering
// are those of the operations one by one, and an atomic lands as a CPU atomic on the word, as
// UCX's shared-memory and software atomics and the same host's PEs do theirs.
#include <fmt/format.h>

#include <cstring>
#include <span>

#include "common/backoff.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "transport/ucx_transport.hpp"

namespace shmoe::transport {
namespace {

constexpr unsigned kBatchAm = 1;
constexpr unsigned kBatchAppliedAm = 2;
// A message's size when it is sent for being full: big enough that 8-byte puts and atomics cost
// a few percent of a message each, small enough to go as one eager send of UCX's transports
// (rendezvous, which the target would have to fetch, is refused).
constexpr std::size_t kBatchCapacity = 8192;

struct BatchApplied {
  std::uint64_t channel_id = 0;
  std::uint32_t pe = 0;  // the PE that applied the message
  std::uint32_t unused = 0;
};

bool posted_op(AmoOp op) {
  return op == AmoOp::kStore || op == AmoOp::kAdd || op == AmoOp::kAnd || op == AmoOp::kOr ||
         op == AmoOp::kXor;
}

// A request freed by its owner gets no callback, so the callback frees it, and the bytes that
// had to live until the send completed. A send cancelled by the endpoint's close at the end of
// the job has nobody left to tell.
void free_sent_message(void* request, ucs_status_t status, void* user_data) {
  delete static_cast<std::vector<std::byte>*>(user_data);
  ucp_request_free(request);
  if (status != UCS_OK && status != UCS_ERR_CANCELED) {
    log::fatal(fmt::format("UCX batch session message failed: {}", ucs_status_string(status)));
  }
}

// One eager active message, not waited for: the bytes live until UCX is done with them.
void send_message(ucp_ep_h ep, unsigned id, std::vector<std::byte> bytes, int pe) {
  auto owned = std::make_unique<std::vector<std::byte>>(std::move(bytes));
  ucp_request_param_t prm{};
  prm.op_attr_mask =
      UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  prm.flags = UCP_AM_SEND_FLAG_EAGER;
  prm.cb.send = &free_sent_message;
  prm.user_data = owned.get();
  ucs_status_ptr_t request =
      ucp_am_send_nbx(ep, id, nullptr, 0, owned->data(), owned->size(), &prm);
  if (UCS_PTR_IS_PTR(request)) {
    owned.release();  // the callback frees it
  } else if (UCS_PTR_IS_ERR(request)) {
    log::fatal(fmt::format("UCX batch session message to PE {} failed: {}", pe,
                           ucs_status_string(UCS_PTR_STATUS(request))));
  }
}

}  // namespace

void UcxTransport::register_batch_handlers() {
  auto set = [&](unsigned id, ucp_am_recv_callback_t cb) {
    ucp_am_handler_param_t param{};
    param.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                       UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    param.id = id;
    param.flags = UCP_AM_FLAG_WHOLE_MSG;
    param.cb = cb;
    param.arg = this;
    const ucs_status_t status = ucp_worker_set_am_recv_handler(worker_, &param);
    if (status != UCS_OK) {
      throw make_error("UCX: ucp_worker_set_am_recv_handler failed: {}", ucs_status_string(status));
    }
  };
  set(kBatchAm, &UcxTransport::on_batch);
  set(kBatchAppliedAm, &UcxTransport::on_batch_applied);
}

void UcxTransport::start_batch(Channel* ch) {
  channel(ch).batching.store(true, std::memory_order_relaxed);
}

void UcxTransport::stop_batch(Channel* ch) {
  UcxChannel& c = channel(ch);
  c.batching.store(false, std::memory_order_relaxed);
  std::lock_guard lock(c.batch_mutex);
  for (int pe = 0; pe < size_; ++pe) send_batch_locked(c, pe);
}

bool UcxTransport::try_batch_put(UcxChannel& ch, int pe, std::size_t offset, const void* src,
                                 std::size_t bytes) {
  if (!ch.batching.load(std::memory_order_relaxed) || bytes > batch_put_max_) return false;
  std::lock_guard lock(ch.batch_mutex);
  hold_room(ch, pe, batch::kPutRecordBytes + bytes).batch.append_put(offset, src, bytes);
  return true;
}

// Misaligned words go the way they always went: the target refuses them in a message.
bool UcxTransport::try_batch_atomic(UcxChannel& ch, int pe, std::size_t offset,
                                    const AmoRequest& request) {
  if (!ch.batching.load(std::memory_order_relaxed) || !posted_op(request.op) ||
      offset % request.width != 0) {
    return false;
  }
  std::lock_guard lock(ch.batch_mutex);
  hold_room(ch, pe, batch::kAtomicRecordBytes).batch.append_atomic(offset, request);
  return true;
}

// The data and its signal in one message, in that order: the target applies the put before the
// signal's atomic, so a PE that sees the signal sees the data, without the flush that an
// ordinary put-with-signal's signal waits for.
bool UcxTransport::try_batch_put_signal(UcxChannel& ch, int pe, std::size_t offset, const void* src,
                                        std::size_t bytes, const SignalUpdate& signal) {
  if (!ch.batching.load(std::memory_order_relaxed) || bytes > batch_put_max_ ||
      signal.offset % 8 != 0) {
    return false;
  }
  std::lock_guard lock(ch.batch_mutex);
  Endpoint& e = hold_room(
      ch, pe, (bytes > 0 ? batch::kPutRecordBytes + bytes : 0) + batch::kAtomicRecordBytes);
  if (bytes > 0) e.batch.append_put(offset, src, bytes);
  e.batch.append_atomic(signal.offset,
                        AmoRequest{signal.add ? AmoOp::kAdd : AmoOp::kStore, 8, signal.value, 0});
  return true;
}

// With batch_mutex held: the peer's message, sent first if `record_bytes` more would overflow
// it, and started if it holds nothing.
UcxTransport::Endpoint& UcxTransport::hold_room(UcxChannel& ch, int pe, std::size_t record_bytes) {
  Endpoint& e = endpoint(ch, pe);
  if (e.batch_held.load(std::memory_order_relaxed) && !e.batch.fits(record_bytes, kBatchCapacity)) {
    send_batch_locked(ch, pe);
  }
  if (!e.batch_held.load(std::memory_order_relaxed)) {
    e.batch.start(batch::BatchHeader{batch::kMagic, static_cast<std::uint32_t>(rank_), ch.id},
                  kBatchCapacity);
    e.batch_held.store(true, std::memory_order_relaxed);
    ch.held.fetch_add(1, std::memory_order_relaxed);
    held_batches_.fetch_add(1, std::memory_order_relaxed);
  }
  return e;
}

void UcxTransport::send_batch(UcxChannel& ch, int pe) {
  if (!ch.endpoints[pe].batch_held.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(ch.batch_mutex);
  send_batch_locked(ch, pe);
}

void UcxTransport::send_batch_locked(UcxChannel& ch, int pe) {
  Endpoint& e = ch.endpoints[pe];
  if (!e.batch_held.load(std::memory_order_relaxed)) return;
  std::vector<std::byte> message = e.batch.take();
  e.batch_held.store(false, std::memory_order_relaxed);
  ch.held.fetch_sub(1, std::memory_order_relaxed);
  held_batches_.fetch_sub(1, std::memory_order_relaxed);
  ++e.batches_sent;
  ch.unapplied.fetch_add(1, std::memory_order_relaxed);
  send_message(e.ep, kBatchAm, std::move(message), pe);
}

void UcxTransport::complete_channel_batches(UcxChannel& ch, const int* pes, std::size_t n) {
  if (ch.held.load(std::memory_order_acquire) == 0 &&
      ch.unapplied.load(std::memory_order_acquire) == 0) {
    return;
  }
  std::vector<std::pair<int, std::uint64_t>> awaited;  // (PE, messages it must have applied)
  {
    std::lock_guard lock(ch.batch_mutex);
    const std::size_t count = pes == nullptr ? static_cast<std::size_t>(size_) : n;
    for (std::size_t i = 0; i < count; ++i) {
      const int pe = pes == nullptr ? static_cast<int>(i) : pes[i];
      Endpoint& e = ch.endpoints[pe];
      if (e.ep == nullptr) continue;
      send_batch_locked(ch, pe);
      if (e.batches_applied.load(std::memory_order_acquire) < e.batches_sent) {
        awaited.emplace_back(pe, e.batches_sent);
      }
    }
  }
  Backoff backoff;
  for (const auto& [pe, sent] : awaited) {
    const Endpoint& e = ch.endpoints[pe];
    while (true) {
      drain_acks();
      if (e.batches_applied.load(std::memory_order_acquire) >= sent) break;
      if (progress()) continue;
      if (backoff.pause()) {
        report_hang(WaitState{"UCX batch",
                              fmt::format("UCX: PE {} to apply a batch session's messages (the "
                                          "peer's worker must progress)",
                                          pe),
                              pe, 1, 0, 0},
                    backoff.waited());
      }
    }
  }
}

void UcxTransport::complete_batches() {
  std::vector<UcxChannel*> open;
  {
    std::lock_guard lock(channels_mutex_);
    for (const auto& [id, ch] : channels_) open.push_back(ch);
  }
  for (UcxChannel* ch : open) complete_channel_batches(*ch);
}

// A channel another thread is filling keeps its message: that thread sends it.
void UcxTransport::send_held_batches() {
  std::lock_guard lock(channels_mutex_);
  for (const auto& [id, ch] : channels_) {
    if (ch->held.load(std::memory_order_relaxed) == 0) continue;
    std::unique_lock fill(ch->batch_mutex, std::try_to_lock);
    if (!fill.owns_lock()) continue;
    for (int pe = 0; pe < size_; ++pe) send_batch_locked(*ch, pe);
  }
}

void UcxTransport::drain_acks() {
  std::vector<std::pair<std::uint64_t, int>> arrived;
  {
    std::lock_guard lock(acks_mutex_);
    if (acks_.empty()) return;
    arrived.swap(acks_);
  }
  std::lock_guard lock(channels_mutex_);
  for (const auto& [id, pe] : arrived) {
    auto it = channels_.find(id);
    if (it == channels_.end() || it->second->endpoints[pe].ep == nullptr) {
      log::warn(
          "UCX: PE {} acknowledged a batch session message of a context this PE does not "
          "have (id {}): ignored",
          pe, id);
      continue;
    }
    it->second->endpoints[pe].batches_applied.fetch_add(1, std::memory_order_release);
    it->second->unapplied.fetch_sub(1, std::memory_order_release);
  }
}

// The target's side. A message from a peer is checked whole before any of it is applied: a record
// outside the segment, cut off by the message's end, or of an unknown kind stops this PE with the
// reason (a peer that sends one is broken or hostile, and dropping the message would leave it
// waiting for an acknowledgement that never comes).
ucs_status_t UcxTransport::on_batch(void* self, const void* header, std::size_t header_length,
                                    void* data, std::size_t length,
                                    const ucp_am_recv_param_t* param) {
  (void)header;
  auto& t = *static_cast<UcxTransport*>(self);
  if (t.default_channel_ == nullptr) {
    // The transport is closing (finalize completed every batch before its barrier): nobody is
    // left to acknowledge to, and nothing may still be written.
    log::warn("UCX: a batch session message arrived while the transport closes: ignored");
    return UCS_OK;
  }
  if (header_length != 0 || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) {
    log::fatal(
        "UCX: refused a batch session message that came with a header or by rendezvous "
        "(a peer of another shmoe version?): none of it was applied");
  }
  const std::span<const std::byte> message(static_cast<const std::byte*>(data), length);
  if (auto fault = batch::check_batch(message, t.segment_size_)) {
    log::fatal(fmt::format(
        "UCX: refused a malformed batch session message ({}): none of it was applied", *fault));
  }
  const batch::BatchHeader h = batch::header_of(message);
  const auto from = static_cast<int>(h.sender_pe);
  if (h.sender_pe >= static_cast<std::uint32_t>(t.size_) || from == t.rank_ ||
      t.remotes_[from].worker_address.empty()) {
    log::fatal(fmt::format(
        "UCX: refused a batch session message from PE {}, which this PE does not reach over UCX",
        h.sender_pe));
  }
  batch::apply_batch(message, t.segment_);
  BatchApplied applied{h.channel_id, static_cast<std::uint32_t>(t.rank_), 0};
  std::vector<std::byte> ack(sizeof applied);
  std::memcpy(ack.data(), &applied, sizeof applied);
  send_message(t.default_channel_->endpoints[from].ep, kBatchAppliedAm, std::move(ack), from);
  return UCS_OK;
}

ucs_status_t UcxTransport::on_batch_applied(void* self, const void* header,
                                            std::size_t header_length, void* data,
                                            std::size_t length, const ucp_am_recv_param_t* param) {
  (void)header;
  auto& t = *static_cast<UcxTransport*>(self);
  BatchApplied applied;
  if (header_length != 0 || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0 ||
      length != sizeof applied) {
    log::fatal(fmt::format("UCX: refused a malformed batch acknowledgement ({} bytes)", length));
  }
  std::memcpy(&applied, data, sizeof applied);
  if (applied.pe >= static_cast<std::uint32_t>(t.size_)) {
    log::fatal(fmt::format("UCX: refused a batch acknowledgement from PE {}, outside the job",
                           applied.pe));
  }
  std::lock_guard lock(t.acks_mutex_);
  t.acks_.emplace_back(applied.channel_id, static_cast<int>(applied.pe));
  return UCS_OK;
}

}  // namespace shmoe::transport
