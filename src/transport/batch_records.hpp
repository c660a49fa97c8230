// The wire form of a batch session's coalesced operations (OpenSHMEM 1.6 section 9.9): small puts
// and non-fetching atomics to one peer, appended in issue order to one message that the target
// checks as a whole and then applies in that order. A put record carries its bytes; an atomic
// record its operation, width and operand. The target applies atomics with the CPU atomics the
// shared-memory transport uses (atomic_on_word), so they are atomic with every other atomic on the
// word that runs on a CPU: the same host's PEs, and UCX's shared-memory and software atomics.
//
// The message comes from another process, so nothing in it is trusted: check_batch() bounds every
// record by the message and by the segment, and apply_batch() writes nothing unless the whole
// message passed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "transport/transport.hpp"

namespace shmoe::transport::batch {

// The first bytes of every batch message: which context (a number the sender gave it) and which
// PE sent it, so that the target can acknowledge it to the right one.
struct BatchHeader {
  std::uint32_t magic = 0;
  std::uint32_t sender_pe = 0;
  std::uint64_t channel_id = 0;
};
inline constexpr std::uint32_t kMagic = 0x53424331;  // "SBC1"
static_assert(sizeof(BatchHeader) == 16, "the header is sent as it lies in memory");

enum class RecordKind : std::uint8_t { kPut = 1, kAtomic = 2 };

// Record sizes before any payload: kind, then for a put a 32-bit length and the offset; for an
// atomic the operation, the width, the offset and the operand.
inline constexpr std::size_t kPutRecordBytes = 1 + 4 + 8;
inline constexpr std::size_t kAtomicRecordBytes = 1 + 1 + 1 + 8 + 8;

// The message being filled for one (context, peer). Not thread-safe: its owner locks.
class BatchWriter {
 public:
  // Empties the writer and writes `header`; `capacity` bytes are reserved so that filling the
  // message does not reallocate it.
  void start(const BatchHeader& header, std::size_t capacity = 0);
  bool empty() const { return records_ == 0; }
  std::size_t size() const { return bytes_.size(); }
  // Whether a record of `record_bytes` (payload included) still fits under `capacity`.
  bool fits(std::size_t record_bytes, std::size_t capacity) const {
    return bytes_.size() + record_bytes <= capacity;
  }
  void append_put(std::size_t offset, const void* src, std::size_t bytes);
  // Only the posted (non-fetching) operations: kStore, kAdd, kAnd, kOr, kXor.
  void append_atomic(std::size_t offset, const AmoRequest& request);
  // Hands the finished message over and leaves the writer empty (start() before reuse).
  std::vector<std::byte> take();

 private:
  std::vector<std::byte> bytes_;
  std::size_t records_ = 0;
};

// Why `message` may not be applied to a segment of `segment_bytes` (nullopt: it may): a short or
// unknown header, a record cut off by the end of the message, an unknown kind or operation, a
// width other than 1, 2, 4 or 8, a misaligned atomic, or bytes outside the segment.
std::optional<std::string> check_batch(std::span<const std::byte> message,
                                       std::size_t segment_bytes);
// The header of a message check_batch accepted.
BatchHeader header_of(std::span<const std::byte> message);
// Applies every record, in order, to `segment`; only for a message check_batch accepted.
void apply_batch(std::span<const std::byte> message, std::byte* segment);

}  // namespace shmoe::transport::batch
