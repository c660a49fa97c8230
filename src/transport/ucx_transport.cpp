#include "transport/ucx_transport.hpp"

#include <poll.h>
#include <time.h>

#include <cstring>
#include <sstream>

#include "common/backoff.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "common/settings.hpp"
#include "transport/narrow_atomic.hpp"

namespace shmoe::transport {
namespace {

std::string to_hex(const void* data, std::size_t bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes * 2);
  for (std::size_t i = 0; i < bytes; ++i) {
    const auto b = static_cast<unsigned char>(static_cast<const char*>(data)[i]);
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

std::vector<std::byte> from_hex(const std::string& text, int pe) {
  auto digit = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw make_error("malformed UCX start-up record from PE {}: '{}' is not a hex digit", pe, c);
  };
  if (text.size() % 2 != 0) throw make_error("malformed UCX start-up record from PE {}", pe);
  std::vector<std::byte> out(text.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<std::byte>(digit(text[2 * i]) * 16 + digit(text[2 * i + 1]));
  }
  return out;
}

void check(ucs_status_t status, const char* what) {
  if (status != UCS_OK) throw make_error("UCX: {} failed: {}", what, ucs_status_string(status));
}

// What the store carries for each PE: its segment base, worker address and packed remote key.
struct UcxRecord {
  std::uint64_t base = 0;
  std::vector<std::byte> worker_address;
  std::vector<std::byte> rkey;
};

UcxRecord decode(const std::string& text, int pe) {
  std::istringstream in(text);
  std::string base, address, rkey;
  if (!std::getline(in, base) || !std::getline(in, address) || !std::getline(in, rkey)) {
    throw make_error("malformed UCX start-up record from PE {}", pe);
  }
  UcxRecord r;
  r.base = std::stoull(base, nullptr, 16);
  r.worker_address = from_hex(address, pe);
  r.rkey = from_hex(rkey, pe);
  return r;
}

void drive_worker(void* transport) {
  static_cast<UcxTransport*>(transport)->progress();
}

void sleep_on_worker(void* transport, std::chrono::microseconds at_most) {
  static_cast<UcxTransport*>(transport)->sleep_until_event(at_most);
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
    : rank_(rank), size_(size), peers_(std::make_unique<Peer[]>(size)) {
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  // WAKEUP lets the progress thread and sleeping waits block until a message comes.
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_AMO32 | UCP_FEATURE_AMO64 | UCP_FEATURE_WAKEUP;
  ucp_config_t* config = nullptr;
  check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
  const ucs_status_t init = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  check(init, "ucp_init");

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

  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = segment;
  mp.length = segment_size;
  check(ucp_mem_map(context_, &mp, &memh_), "ucp_mem_map of the symmetric segment");

  std::string mine;
  {
    ucp_address_t* address = nullptr;
    std::size_t address_bytes = 0;
    check(ucp_worker_get_address(worker_, &address, &address_bytes), "ucp_worker_get_address");
    void* rkey = nullptr;
    std::size_t rkey_bytes = 0;
    const ucs_status_t packed = ucp_rkey_pack(context_, memh_, &rkey, &rkey_bytes);
    if (packed == UCS_OK) {
      mine = fmt::format("{:x}\n{}\n{}", reinterpret_cast<std::uintptr_t>(segment),
                         to_hex(address, address_bytes), to_hex(rkey, rkey_bytes));
      ucp_rkey_buffer_release(rkey);
    }
    ucp_worker_release_address(worker_, address);
    check(packed, "ucp_rkey_pack");
  }
  // The only way a worker address or a remote key reaches this PE: every record of this
  // allgather was written through the config store by a connection that proved the job key, and
  // this PE's own connection checked that the store knows the key too (bootstrap/store_auth.hpp),
  // so endpoints and keys come from PEs of this job only; one record per rank, checked by the
  // allgather. (UCX does not authenticate peers itself: a process that reaches this worker's
  // transport directly is outside what the key protects; see the README's Security section.)
  auto records = collectives.allgather("ucx-peers", mine, timeout);
  for (int pe = 0; pe < size; ++pe) {
    if (!reach[pe] || pe == rank) continue;
    UcxRecord r = decode(records[pe], pe);
    Peer& p = peers_[pe];
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep.address = reinterpret_cast<const ucp_address_t*>(r.worker_address.data());
    check(ucp_ep_create(worker_, &ep, &p.ep), "ucp_ep_create");
    check(ucp_ep_rkey_unpack(p.ep, r.rkey.data(), &p.rkey), "ucp_ep_rkey_unpack");
    p.base = r.base;
  }
  set_wait_progress(&drive_worker, &sleep_on_worker, this);
  if (options.progress_thread) progress_thread_ = std::thread([this] { run_progress_thread(); });
}

UcxTransport::~UcxTransport() {
  set_wait_progress(nullptr, nullptr, nullptr);
  stopping_ = true;
  if (progress_thread_.joinable()) {
    ucp_worker_signal(worker_);
    progress_thread_.join();
  }
  // Remote keys go before their endpoints; the endpoints close without waiting for the peer,
  // which may already have gone (every operation was completed by finalize's barrier).
  for (int pe = 0; pe < size_; ++pe) {
    Peer& p = peers_[pe];
    if (p.rkey != nullptr) ucp_rkey_destroy(p.rkey);
    if (p.ep == nullptr) continue;
    ucp_request_param_t prm{};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t request = ucp_ep_close_nbx(p.ep, &prm);
    if (UCS_PTR_IS_PTR(request)) {
      while (ucp_request_check_status(request) == UCS_INPROGRESS) ucp_worker_progress(worker_);
      ucp_request_free(request);
    }
  }
  if (memh_ != nullptr) ucp_mem_unmap(context_, memh_);
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
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

bool UcxTransport::progress() {
  driven_.fetch_add(1, std::memory_order_relaxed);
  return ucp_worker_progress(worker_) != 0;
}

UcxTransport::Peer& UcxTransport::peer(int pe) {
  Peer& p = peers_[pe];
  if (p.ep == nullptr) [[unlikely]] {
    log::fatal(fmt::format("UCX transport: PE {} has no endpoint (internal routing error)", pe));
  }
  return p;
}

void UcxTransport::wait(ucs_status_ptr_t request, const char* what, int pe) {
  if (request == nullptr) return;
  if (UCS_PTR_IS_ERR(request)) {
    log::fatal(fmt::format("UCX {} with PE {} failed: {}", what, pe,
                           ucs_status_string(UCS_PTR_STATUS(request))));
  }
  Backoff backoff;
  ucs_status_t status;
  while ((status = ucp_request_check_status(request)) == UCS_INPROGRESS) {
    if (progress()) continue;
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
    log::fatal(fmt::format("UCX {} with PE {} failed: {}", what, pe, ucs_status_string(status)));
  }
}

ucs_status_ptr_t UcxTransport::post_put(int pe, std::size_t offset, const void* src,
                                        std::size_t bytes) {
  Peer& p = peer(pe);
  ucp_request_param_t prm{};
  ucs_status_ptr_t request = ucp_put_nbx(p.ep, src, bytes, p.base + offset, p.rkey, &prm);
  p.writes_in_flight.store(true, std::memory_order_relaxed);
  return request;
}

ucs_status_ptr_t UcxTransport::post_get(int pe, std::size_t offset, void* dst, std::size_t bytes) {
  flush_peer_if_written(pe);
  Peer& p = peer(pe);
  ucp_request_param_t prm{};
  return ucp_get_nbx(p.ep, dst, bytes, p.base + offset, p.rkey, &prm);
}

// A put's request completes when `src` may be reused; arrival at the target takes a flush.
void UcxTransport::put(int pe, std::size_t offset, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  wait(post_put(pe, offset, src, bytes), "put", pe);
}

void UcxTransport::get(int pe, std::size_t offset, void* dst, std::size_t bytes) {
  if (bytes == 0) return;
  wait(post_get(pe, offset, dst, bytes), "get", pe);
}

// Freed requests still complete; quiet()'s flush waits for them. An error is reported at once.
void UcxTransport::release_nbi(ucs_status_ptr_t request, const char* what, int pe) {
  if (UCS_PTR_IS_PTR(request)) {
    ucp_request_free(request);
  } else if (UCS_PTR_IS_ERR(request)) {
    wait(request, what, pe);
  }
}

void UcxTransport::put_nbi(int pe, std::size_t offset, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  release_nbi(post_put(pe, offset, src, bytes), "put_nbi", pe);
}

void UcxTransport::get_nbi(int pe, std::size_t offset, void* dst, std::size_t bytes) {
  if (bytes == 0) return;
  release_nbi(post_get(pe, offset, dst, bytes), "get_nbi", pe);
}

void UcxTransport::flush_peer_if_written(int pe) {
  Peer& p = peer(pe);
  if (!p.writes_in_flight.exchange(false, std::memory_order_acq_rel)) return;
  ucp_request_param_t prm{};
  wait(ucp_ep_flush_nbx(p.ep, &prm), "flush", pe);
}

std::uint64_t UcxTransport::native_atomic(int pe, std::size_t offset, ucp_atomic_op_t op,
                                          unsigned width, std::uint64_t operand,
                                          std::uint64_t compare) {
  flush_peer_if_written(pe);
  Peer& p = peer(pe);
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
  wait(ucp_atomic_op_nbx(p.ep, op, value, 1, p.base + offset, p.rkey, &prm), "atomic", pe);
  return width == 8 ? reply64 : reply32;
}

std::uint64_t UcxTransport::narrow_atomic(int pe, std::size_t offset, const AmoRequest& r) {
  const std::size_t word = offset & ~std::size_t{3};
  const auto old =
      static_cast<std::uint32_t>(native_atomic(pe, word, UCP_ATOMIC_OP_ADD, 4, 0, 0));
  return transport::narrow_atomic(
      static_cast<unsigned>(offset - word), r, old,
      [&](std::uint32_t desired, std::uint32_t expected) {
        return static_cast<std::uint32_t>(
            native_atomic(pe, word, UCP_ATOMIC_OP_CSWAP, 4, desired, expected));
      });
}

std::uint64_t UcxTransport::atomic(int pe, std::size_t offset, const AmoRequest& r) {
  if (r.width == 1 || r.width == 2) return narrow_atomic(pe, offset, r);
  if (r.width != 4 && r.width != 8) {
    throw make_error("atomic of width {} bytes is not supported (1, 2, 4 or 8)", r.width);
  }
  switch (r.op) {
    case AmoOp::kLoad:
      return native_atomic(pe, offset, UCP_ATOMIC_OP_ADD, r.width, 0, 0);
    case AmoOp::kStore:
    case AmoOp::kSwap:
      return native_atomic(pe, offset, UCP_ATOMIC_OP_SWAP, r.width, r.operand, 0);
    case AmoOp::kCompareSwap:
      return native_atomic(pe, offset, UCP_ATOMIC_OP_CSWAP, r.width, r.operand, r.compare);
    case AmoOp::kAdd:
      return native_atomic(pe, offset, UCP_ATOMIC_OP_ADD, r.width, r.operand, 0);
    case AmoOp::kAnd:
      return native_atomic(pe, offset, UCP_ATOMIC_OP_AND, r.width, r.operand, 0);
    case AmoOp::kOr:
      return native_atomic(pe, offset, UCP_ATOMIC_OP_OR, r.width, r.operand, 0);
    case AmoOp::kXor:
      return native_atomic(pe, offset, UCP_ATOMIC_OP_XOR, r.width, r.operand, 0);
  }
  return 0;
}

// UCX's own fence only orders operations that share a lane, and RMA and atomics may travel on
// different transports (e.g. shared memory for puts, TCP for atomics): flushing every peer this
// PE wrote to since the last flush orders them whatever the lanes.
void UcxTransport::fence() {
  for (int pe = 0; pe < size_; ++pe) {
    if (peers_[pe].ep != nullptr) flush_peer_if_written(pe);
  }
}

void UcxTransport::quiet() {
  for (int pe = 0; pe < size_; ++pe) {
    peers_[pe].writes_in_flight.store(false, std::memory_order_relaxed);
  }
  ucp_request_param_t prm{};
  wait(ucp_worker_flush_nbx(worker_, &prm), "flush", rank_);
}

}  // namespace shmoe::transport
