#include "transport/batch_records.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <utility>

#include "transport/shm_transport.hpp"

namespace shmoe::transport::batch {
namespace {

// Records are packed without padding, so every field is copied, never cast in place.
template <typename T>
void append_bytes(std::vector<std::byte>& out, const T& value) {
  const auto* p = reinterpret_cast<const std::byte*>(&value);
  out.insert(out.end(), p, p + sizeof(T));
}

template <typename T>
T read_at(std::span<const std::byte> message, std::size_t at) {
  T value;
  std::memcpy(&value, message.data() + at, sizeof(T));
  return value;
}

bool posted_op(std::uint8_t op) {
  switch (static_cast<AmoOp>(op)) {
    case AmoOp::kStore:
    case AmoOp::kAdd:
    case AmoOp::kAnd:
    case AmoOp::kOr:
    case AmoOp::kXor:
      return true;
    default:
      return false;
  }
}

// Calls put(offset, bytes, length) and atomic(offset, request) for each record, in order; stops
// at the first fault and returns it. The one parser for checking and applying, so the two cannot
// disagree about where a record ends.
template <typename OnPut, typename OnAtomic>
std::optional<std::string> walk(std::span<const std::byte> message, std::size_t segment_bytes,
                                OnPut&& put, OnAtomic&& atomic) {
  if (message.size() < sizeof(BatchHeader)) {
    return fmt::format("{} bytes, shorter than the {}-byte header", message.size(),
                       sizeof(BatchHeader));
  }
  if (read_at<std::uint32_t>(message, 0) != kMagic) return std::string("unknown header");
  std::size_t at = sizeof(BatchHeader);
  for (std::size_t index = 0; at < message.size(); ++index) {
    const std::size_t left = message.size() - at;
    const auto kind = static_cast<RecordKind>(message[at]);
    if (kind == RecordKind::kPut) {
      if (left < kPutRecordBytes) return fmt::format("record {} (put) is cut off", index);
      const auto length = read_at<std::uint32_t>(message, at + 1);
      const auto offset = read_at<std::uint64_t>(message, at + 5);
      if (length > left - kPutRecordBytes) {
        return fmt::format("record {} (put of {} bytes) runs past the message", index, length);
      }
      if (offset > segment_bytes || length > segment_bytes - offset) {
        return fmt::format(
            "record {} (put of {} bytes at offset {}) is outside the {}-byte segment", index,
            length, offset, segment_bytes);
      }
      put(static_cast<std::size_t>(offset), message.data() + at + kPutRecordBytes, length);
      at += kPutRecordBytes + length;
    } else if (kind == RecordKind::kAtomic) {
      if (left < kAtomicRecordBytes) return fmt::format("record {} (atomic) is cut off", index);
      const auto op = read_at<std::uint8_t>(message, at + 1);
      const auto width = read_at<std::uint8_t>(message, at + 2);
      const auto offset = read_at<std::uint64_t>(message, at + 3);
      if (!posted_op(op)) return fmt::format("record {}: unknown atomic operation {}", index, op);
      if (width != 1 && width != 2 && width != 4 && width != 8) {
        return fmt::format("record {}: atomic width {} (1, 2, 4 or 8)", index, width);
      }
      if (offset % width != 0) {
        return fmt::format("record {}: atomic at offset {} not aligned to its width {}", index,
                           offset, width);
      }
      if (offset > segment_bytes || width > segment_bytes - offset) {
        return fmt::format("record {} (atomic at offset {}) is outside the {}-byte segment", index,
                           offset, segment_bytes);
      }
      atomic(static_cast<std::size_t>(offset),
             AmoRequest{static_cast<AmoOp>(op), width, read_at<std::uint64_t>(message, at + 11)});
      at += kAtomicRecordBytes;
    } else {
      return fmt::format("record {}: unknown kind {}", index, static_cast<unsigned>(kind));
    }
  }
  return std::nullopt;
}

}  // namespace

void BatchWriter::start(const BatchHeader& header, std::size_t capacity) {
  bytes_.clear();
  bytes_.reserve(capacity);
  records_ = 0;
  append_bytes(bytes_, header);
}

void BatchWriter::append_put(std::size_t offset, const void* src, std::size_t bytes) {
  bytes_.push_back(static_cast<std::byte>(RecordKind::kPut));
  append_bytes(bytes_, static_cast<std::uint32_t>(bytes));
  append_bytes(bytes_, static_cast<std::uint64_t>(offset));
  const auto* from = static_cast<const std::byte*>(src);
  bytes_.insert(bytes_.end(), from, from + bytes);
  ++records_;
}

void BatchWriter::append_atomic(std::size_t offset, const AmoRequest& request) {
  bytes_.push_back(static_cast<std::byte>(RecordKind::kAtomic));
  bytes_.push_back(static_cast<std::byte>(request.op));
  bytes_.push_back(static_cast<std::byte>(request.width));
  append_bytes(bytes_, static_cast<std::uint64_t>(offset));
  append_bytes(bytes_, request.operand);
  ++records_;
}

std::vector<std::byte> BatchWriter::take() {
  records_ = 0;
  return std::exchange(bytes_, {});
}

std::optional<std::string> check_batch(std::span<const std::byte> message,
                                       std::size_t segment_bytes) {
  return walk(
      message, segment_bytes, [](std::size_t, const std::byte*, std::size_t) {},
      [](std::size_t, const AmoRequest&) {});
}

BatchHeader header_of(std::span<const std::byte> message) {
  return read_at<BatchHeader>(message, 0);
}

// The segment's size no longer matters: check_batch bounded every record by it.
void apply_batch(std::span<const std::byte> message, std::byte* segment) {
  walk(
      message, SIZE_MAX,
      [&](std::size_t offset, const std::byte* bytes, std::size_t length) {
        std::memcpy(segment + offset, bytes, length);
      },
      [&](std::size_t offset, const AmoRequest& request) {
        atomic_on_word(segment + offset, request);
      });
}

}  // namespace shmoe::transport::batch
