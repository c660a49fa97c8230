// The interface between the SHMEM API layer and whatever moves bytes between PEs: one table of
// operations, in the shape of UCX's uct_iface_ops and NVSHMEM's host transport ops. Addresses are
// (pe, offset into that PE's symmetric segment): every transport can name them the same way.
// Values of atomics travel as bit patterns of 1, 2, 4 or 8 bytes, because OpenSHMEM's AMOs
// (integer add/and/or/xor, and fetch/set/swap/compare-swap of any type) act on bits alone.
//
// Every operation names the channel it belongs to: an OpenSHMEM context's own operations, so
// that quiet() on one context waits for those and no others. nullptr is the PE's default channel
// (SHMEM_CTX_DEFAULT and the runtime's own traffic).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace shmoe::transport {

enum class AmoOp : std::uint8_t { kLoad, kStore, kSwap, kCompareSwap, kAdd, kAnd, kOr, kXor };

struct AmoRequest {
  AmoOp op = AmoOp::kLoad;
  std::uint8_t width = 8;  // bytes: 1, 2, 4 or 8
  std::uint64_t operand = 0;
  std::uint64_t compare = 0;  // kCompareSwap only
};

// The signal half of a put-with-signal: a 64-bit word set to, or incremented by, `value`.
struct SignalUpdate {
  std::size_t offset = 0;
  bool add = false;  // SHMEM_SIGNAL_ADD; otherwise SHMEM_SIGNAL_SET
  std::uint64_t value = 0;
};

// A strided block transfer (shmem_ibput/ibget, and iput/iget as blocks of one element): `count`
// blocks of `block_bytes`, the i-th at i * remote_stride bytes past the remote offset and at
// i * local_stride bytes past the local buffer. Strides are at least block_bytes.
struct Blocks {
  std::size_t block_bytes = 0;
  std::size_t count = 0;
  std::size_t remote_stride = 0;
  std::size_t local_stride = 0;
  // Blocks that touch end to end on both sides are one contiguous transfer.
  bool contiguous() const { return remote_stride == block_bytes && local_stride == block_bytes; }
};

// What a transport keeps per context (its own endpoints, its operations in flight). A transport
// that completes every operation on return keeps nothing and returns nullptr from open_channel.
class Channel {
 public:
  virtual ~Channel() = default;
};

// A get whose caller may stop waiting for it (a peer stopped on another host answers nothing
// until it resumes): the data lands in a buffer of the get's own, kept until the transport has
// completed the get, however late, so a late answer never writes into memory reused since.
class DetachedGet {
 public:
  enum class State { kInFlight, kDone, kFailed };
  virtual ~DetachedGet() = default;  // gives the get up if it is still in flight
  virtual State state() const = 0;
  virtual const std::byte* data() const = 0;  // once kDone
};

// A DetachedGet complete when made (a transport whose gets complete on return).
class CompletedGet final : public DetachedGet {
 public:
  explicit CompletedGet(std::size_t bytes) : data_(bytes) {}
  State state() const override { return State::kDone; }
  const std::byte* data() const override { return data_.data(); }
  std::byte* buffer() { return data_.data(); }

 private:
  std::vector<std::byte> data_;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string_view name() const = 0;

  // Whether PE `pe` can be reached by loads and stores: the address of its segment in this
  // process, or nullptr (a PE on another host, or every peer under SHMOE_TRANSPORT=ucx).
  virtual std::byte* direct_base(int pe) const = 0;

  // A channel for one new context; close it (after its quiet) before destroying the transport.
  virtual std::unique_ptr<Channel> open_channel() { return nullptr; }

  // Blocking from the caller's view: `src` may be reused on return. Completion at the target is
  // guaranteed by quiet(); ordering between two operations to one PE by fence().
  virtual void put(Channel* ch, int pe, std::size_t offset, const void* src, std::size_t bytes) = 0;
  // Returns when `dst` holds the data.
  virtual void get(Channel* ch, int pe, std::size_t offset, void* dst, std::size_t bytes) = 0;
  // The _nbi forms: `src` must stay untouched, and `dst` holds the data, only after quiet().
  // A transport whose operations complete on return needs nothing more than the blocking forms.
  virtual void put_nbi(Channel* ch, int pe, std::size_t offset, const void* src,
                       std::size_t bytes) {
    put(ch, pe, offset, src, bytes);
  }
  virtual void get_nbi(Channel* ch, int pe, std::size_t offset, void* dst, std::size_t bytes) {
    get(ch, pe, offset, dst, bytes);
  }
  // Posts a DetachedGet of `bytes` at (pe, offset). Unlike get_nbi it is not ordered after this
  // channel's earlier writes to `pe` (ordering them would wait for that peer), and no quiet
  // waits for it.
  virtual std::unique_ptr<DetachedGet> get_detached(Channel* ch, int pe, std::size_t offset,
                                                    std::size_t bytes) {
    auto got = std::make_unique<CompletedGet>(bytes);
    get(ch, pe, offset, got->buffer(), bytes);
    return got;
  }
  // Every block of a strided transfer, with put's and get's completion: the default moves one
  // block per put/get; a transport with a cheaper way (all in flight at once) overrides them.
  virtual void put_blocks(Channel* ch, int pe, std::size_t offset, const void* src,
                          const Blocks& blocks) {
    const auto* from = static_cast<const std::byte*>(src);
    for (std::size_t i = 0; i < blocks.count; ++i) {
      put(ch, pe, offset + i * blocks.remote_stride, from + i * blocks.local_stride,
          blocks.block_bytes);
    }
  }
  virtual void get_blocks(Channel* ch, int pe, std::size_t offset, void* dst,
                          const Blocks& blocks) {
    auto* to = static_cast<std::byte*>(dst);
    for (std::size_t i = 0; i < blocks.count; ++i) {
      get(ch, pe, offset + i * blocks.remote_stride, to + i * blocks.local_stride,
          blocks.block_bytes);
    }
  }
  // A single value of up to 8 bytes, written as one store (shmem_p): a peer polling the word
  // never sees it torn. Complete at the target after quiet(), like put().
  virtual void put_value(Channel* ch, int pe, std::size_t offset, std::uint64_t bits,
                         std::size_t bytes) = 0;
  // Performs the operation atomically with respect to every other atomic on that word and
  // returns the previous value (the loaded value for kLoad).
  virtual std::uint64_t fetch_atomic(Channel* ch, int pe, std::size_t offset,
                                     const AmoRequest& request) = 0;
  // The same without a result: the caller does not wait for the target, and quiet() completes
  // it. kLoad is not a posted operation.
  virtual void post_atomic(Channel* ch, int pe, std::size_t offset, const AmoRequest& request) {
    fetch_atomic(ch, pe, offset, request);
  }
  // `bytes` from `src` to (pe, offset), then the signal, which a peer must never see before the
  // data. nbi: `src` must stay untouched until quiet(); otherwise it may be reused on return.
  virtual void put_signal(Channel* ch, int pe, std::size_t offset, const void* src,
                          std::size_t bytes, const SignalUpdate& signal, bool nbi) = 0;
  // Orders this channel's earlier writes to each PE before its later ones.
  virtual void fence(Channel* ch) = 0;
  // Completes every operation of this channel (and only those).
  virtual void quiet(Channel* ch) = 0;
  // Completes at least this channel's operations to the given PEs (world numbers, in range).
  // A transport that cannot single them out completes the whole channel.
  virtual void quiet_pes(Channel* ch, const int* pes, std::size_t n) {
    (void)pes;
    (void)n;
    quiet(ch);
  }
  // A batch session on the channel (shmem_ctx_session_start with SHMEM_CTX_SESSION_BATCH): its
  // small writes may be held back and sent together until stop_batch, a fence, a quiet, an
  // operation that is not held back, or a wait. A hint only: completion and ordering stay those
  // of each operation. A transport that gains nothing from it (a store is already cheapest)
  // ignores it.
  virtual void start_batch(Channel* ch) { (void)ch; }
  // Ends the session and sends what it holds; quiet still completes it.
  virtual void stop_batch(Channel* ch) { (void)ch; }
  // Sends and completes every channel's held-back writes (before finalize's barrier: a context
  // the program never quieted or destroyed).
  virtual void complete_batches() {}
  // One pass of the progress engine of a transport that needs one; true if it did something.
  virtual bool progress() { return false; }
};

}  // namespace shmoe::transport
