#include "transport/shm_transport.hpp"

#include <unistd.h>

#include <atomic>
#include <cstring>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/streaming_copy.hpp"
#include "transport/start_record.hpp"

namespace shmoe::transport {
namespace {

std::string encode(const PeerInfo& p) {
  return encode_record([&](Writer& w) {
    w.str(p.host).str(p.segment).i64(static_cast<std::int64_t>(p.segment_size));
    w.str(p.data_segment).i64(static_cast<std::int64_t>(p.data_size));
  });
}

PeerInfo decode(const std::string& text, int pe) {
  return decode_record(text, pe, "shared-memory", [](Reader& r) {
    PeerInfo p;
    p.host = r.str();
    p.segment = r.str();
    p.segment_size = static_cast<std::size_t>(r.i64());
    p.data_segment = r.str();
    p.data_size = static_cast<std::size_t>(r.i64());
    return p;
  });
}

template <typename T>
std::uint64_t apply(void* word, const AmoRequest& r) {
  std::atomic_ref<T> a(*static_cast<T*>(word));
  const T v = static_cast<T>(r.operand);
  switch (r.op) {
    case AmoOp::kLoad:
      return a.load(std::memory_order_acquire);
    case AmoOp::kStore:
      a.store(v, std::memory_order_release);
      return 0;
    case AmoOp::kSwap:
      return a.exchange(v, std::memory_order_acq_rel);
    case AmoOp::kCompareSwap: {
      T expected = static_cast<T>(r.compare);
      a.compare_exchange_strong(expected, v, std::memory_order_acq_rel, std::memory_order_acquire);
      return expected;  // the old value either way
    }
    case AmoOp::kAdd:
      return a.fetch_add(v, std::memory_order_acq_rel);
    case AmoOp::kAnd:
      return a.fetch_and(v, std::memory_order_acq_rel);
    case AmoOp::kOr:
      return a.fetch_or(v, std::memory_order_acq_rel);
    case AmoOp::kXor:
      return a.fetch_xor(v, std::memory_order_acq_rel);
  }
  return 0;
}

}  // namespace

std::uint64_t atomic_on_word(void* word, const AmoRequest& request) {
  switch (request.width) {
    case 1:
      return apply<std::uint8_t>(word, request);
    case 2:
      return apply<std::uint16_t>(word, request);
    case 4:
      return apply<std::uint32_t>(word, request);
    case 8:
      return apply<std::uint64_t>(word, request);
  }
  throw make_error("atomic of width {} bytes is not supported (1, 2, 4 or 8)", request.width);
}

ShmTransport::ShmTransport(bootstrap::StoreCollectives& collectives, int rank, int size,
                           heap::SymmetricHeap& own, const std::string& host,
                           const std::vector<bool>& mapped, std::chrono::milliseconds timeout)
    : heap_size_(own.heap_size()) {
  const std::size_t heap_size = heap_size_;
  peers_.resize(size);
  bases_.assign(size, nullptr);
  bases_[rank] = own.base();
  const heap::Segment& data = own.data_segment();
  PeerInfo mine{host, own.heap_segment().name(), heap_size,
                data.size() > 0 ? data.name() : std::string(), data.size()};
  auto records = collectives.allgather("shm-segments", encode(mine), timeout);
  std::vector<PeerInfo> peers;
  std::vector<std::string> names;
  for (const auto& r : records) {
    peers.push_back(decode(r, static_cast<int>(peers.size())));
    names.push_back(peers.back().segment);
    if (peers.back().data_size > 0) names.push_back(peers.back().data_segment);
  }
  heap::Segment::remove_names_at_fatal_exit(std::move(names));
  // Every PE sees the same records, so every PE takes the same decision here.
  data_size_ = peers[0].data_size;
  for (const auto& p : peers) {
    if (p.data_size != data_size_) data_size_ = 0;
  }
  if (data_size_ == 0 && data.size() > 0 && rank == 0) {
    log::warn(
        "the PEs' program data differ in size (PE 0: {} bytes): they do not run one "
        "executable, so global and static variables are not symmetric in this job",
        peers[0].data_size);
  }
  for (int pe = 0; pe < size; ++pe) {
    const PeerInfo& peer = peers[pe];
    if (pe != rank && !mapped[pe]) continue;
    if (peer.host != host) {
      throw make_error(
          "PE {} runs on host '{}' but this PE runs on '{}': the shared-memory transport reaches "
          "only PEs of one host",
          pe, peer.host, host);
    }
    if (peer.segment_size != heap_size) {
      throw make_error(
          "PE {} has a symmetric heap of {} bytes but this PE has {} bytes: set the "
          "same SHMEM_SYMMETRIC_SIZE for every PE",
          pe, peer.segment_size, heap_size);
    }
    if (pe == rank) continue;
    // A peer's window is laid out like this PE's own: heap, then program data.
    std::byte* at = heap::Segment::reserve_window(heap_size + data_size_);
    peers_[pe].heap = heap::Segment::attach(peer.segment, heap_size, at);
    if (data_size_ > 0) {
      peers_[pe].data = heap::Segment::attach(peer.data_segment, data_size_, at + heap_size);
    }
    bases_[pe] = peers_[pe].heap.base();
  }
  // Names go once every peer holds a mapping, so nothing is left in /dev/shm after this point.
  collectives.barrier("shm-mapped", timeout);
  own.unlink_names();
  heap::Segment::forget_names_at_fatal_exit();
}

void ShmTransport::put(Channel*, int pe, std::size_t offset, const void* src, std::size_t bytes) {
  copy_to_peer(bases_[pe] + offset, src, bytes);
}

// Copies larger than the last-level cache go around it (common/streaming_copy.hpp). The caller's
// fence or quiet orders them (both issue sfence).
void copy_to_peer(std::byte* dst, const void* src, std::size_t bytes) {
  if (bytes >= kStreamingCopyThreshold) {
    copy_non_temporal(dst, src, bytes);
  } else {
    std::memcpy(dst, src, bytes);
  }
}

void ShmTransport::get(Channel*, int pe, std::size_t offset, void* dst, std::size_t bytes) {
  std::memcpy(dst, bases_[pe] + offset, bytes);
}

namespace {

template <std::size_t kBytes>
void copy_fixed_blocks(std::byte* to, std::size_t to_stride, const std::byte* from,
                       std::size_t from_stride, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    std::memcpy(to + i * to_stride, from + i * from_stride, kBytes);
  }
}

// One copy per block, in this function rather than one virtual call each. Blocks of one
// element (iput/iget, ibput with bsize 1) are copies of a size the compiler knows, so each is a
// load and a store instead of a call to memcpy.
void copy_blocks(std::byte* to, std::size_t to_stride, const std::byte* from,
                 std::size_t from_stride, const Blocks& blocks) {
  switch (blocks.block_bytes) {
    case 1:
      return copy_fixed_blocks<1>(to, to_stride, from, from_stride, blocks.count);
    case 2:
      return copy_fixed_blocks<2>(to, to_stride, from, from_stride, blocks.count);
    case 4:
      return copy_fixed_blocks<4>(to, to_stride, from, from_stride, blocks.count);
    case 8:
      return copy_fixed_blocks<8>(to, to_stride, from, from_stride, blocks.count);
    case 16:
      return copy_fixed_blocks<16>(to, to_stride, from, from_stride, blocks.count);
    default:
      for (std::size_t i = 0; i < blocks.count; ++i) {
        std::memcpy(to + i * to_stride, from + i * from_stride, blocks.block_bytes);
      }
  }
}

}  // namespace

void ShmTransport::put_blocks(Channel*, int pe, std::size_t offset, const void* src,
                              const Blocks& blocks) {
  std::byte* to = bases_[pe] + offset;
  const auto* from = static_cast<const std::byte*>(src);
  if (blocks.contiguous()) {
    copy_to_peer(to, from, blocks.block_bytes * blocks.count);
    return;
  }
  copy_blocks(to, blocks.remote_stride, from, blocks.local_stride, blocks);
}

void ShmTransport::get_blocks(Channel*, int pe, std::size_t offset, void* dst,
                              const Blocks& blocks) {
  const std::byte* from = bases_[pe] + offset;
  auto* to = static_cast<std::byte*>(dst);
  if (blocks.contiguous()) {
    std::memcpy(to, from, blocks.block_bytes * blocks.count);
    return;
  }
  copy_blocks(to, blocks.local_stride, from, blocks.remote_stride, blocks);
}

void ShmTransport::put_value(Channel*, int pe, std::size_t offset, std::uint64_t bits,
                             std::size_t bytes) {
  atomic_on_word(bases_[pe] + offset, {AmoOp::kStore, static_cast<std::uint8_t>(bytes), bits});
}

std::uint64_t ShmTransport::fetch_atomic(Channel*, int pe, std::size_t offset,
                                         const AmoRequest& request) {
  return atomic_on_word(bases_[pe] + offset, request);
}

// The store fence orders even the non-temporal stores of a large copy before the signal, which
// is a release store or add that the waiter's acquire load pairs with.
void ShmTransport::put_signal(Channel*, int pe, std::size_t offset, const void* src,
                              std::size_t bytes, const SignalUpdate& signal, bool) {
  std::byte* base = bases_[pe];
  if (bytes > 0) copy_to_peer(base + offset, src, bytes);
  store_fence();
  atomic_on_word(base + signal.offset, {signal.add ? AmoOp::kAdd : AmoOp::kStore, 8, signal.value});
}

// Stores into mapped memory are complete when they retire; what remains is ordering them
// against later stores. glibc's memcpy uses non-temporal stores for large copies, which even a
// seq_cst fence does not order on x86: hence the sfence in both.
void ShmTransport::fence(Channel*) {
  store_fence();
}
void ShmTransport::quiet(Channel*) {
  store_fence();
}

void store_fence() {
  fence_non_temporal();
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

}  // namespace shmoe::transport
