// The wire form of batch sessions' messages (transport/batch_records.hpp): what the writer makes
// applies in order, and a message from a broken or hostile peer is refused whole, with nothing of
// it written.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "transport/batch_records.hpp"

namespace {

using shmoe::transport::AmoOp;
using shmoe::transport::AmoRequest;
using namespace shmoe::transport::batch;

std::vector<std::byte> sample() {
  BatchWriter w;
  w.start(BatchHeader{kMagic, 3, 7});
  const char text[] = "hello";
  w.append_put(8, text, 5);
  w.append_atomic(16, AmoRequest{AmoOp::kAdd, 8, 5, 0});
  w.append_atomic(16, AmoRequest{AmoOp::kAdd, 8, 6, 0});
  w.append_put(9, "J", 1);  // after the first put: it wins
  w.append_atomic(24, AmoRequest{AmoOp::kStore, 4, 0xabcdef01, 0});
  w.append_atomic(28, AmoRequest{AmoOp::kXor, 2, 0xff, 0});
  return w.take();
}

TEST(BatchRecords, AppliesInOrder) {
  const auto message = sample();
  std::vector<std::byte> segment(64);
  ASSERT_FALSE(check_batch(message, segment.size()).has_value());
  EXPECT_EQ(header_of(message).sender_pe, 3u);
  EXPECT_EQ(header_of(message).channel_id, 7u);
  apply_batch(message, segment.data());
  EXPECT_EQ(std::memcmp(segment.data() + 8, "hJllo", 5), 0);
  std::uint64_t sum;
  std::memcpy(&sum, segment.data() + 16, 8);
  EXPECT_EQ(sum, 11u);
  std::uint32_t stored;
  std::memcpy(&stored, segment.data() + 24, 4);
  EXPECT_EQ(stored, 0xabcdef01u);
  std::uint16_t xored;
  std::memcpy(&xored, segment.data() + 28, 2);
  EXPECT_EQ(xored, 0xffu);
}

// Every fault is named, and the segment stays as it was.
void expect_refused(const std::vector<std::byte>& message, std::size_t segment_bytes,
                    const char* reason) {
  const auto fault = check_batch(message, segment_bytes);
  ASSERT_TRUE(fault.has_value()) << "accepted: " << reason;
  EXPECT_NE(fault->find(reason), std::string::npos) << *fault;
}

TEST(BatchRecords, RefusesWritesOutsideTheSegment) {
  const auto message = sample();
  expect_refused(message, 20, "outside the 20-byte segment");  // the atomic at 16 + 8
  BatchWriter w;
  w.start(BatchHeader{kMagic, 0, 0});
  w.append_put(SIZE_MAX - 2, "abc", 3);  // offset + length wraps around
  expect_refused(w.take(), 4096, "outside");
}

TEST(BatchRecords, RefusesCutOffAndUnknownRecords) {
  auto message = sample();
  for (std::size_t cut = sizeof(BatchHeader) + 1; cut < message.size(); ++cut) {
    std::vector<std::byte> shorter(message.begin(), message.begin() + cut);
    // Some cuts fall between records and leave a valid shorter message; none may pass that ends
    // inside one.
    if (check_batch(shorter, 64).has_value()) continue;
    std::size_t at = sizeof(BatchHeader);
    bool on_boundary = false;
    for (std::size_t ends : {kPutRecordBytes + 5, kAtomicRecordBytes, kAtomicRecordBytes,
                             kPutRecordBytes + 1, kAtomicRecordBytes, kAtomicRecordBytes}) {
      at += ends;
      on_boundary = on_boundary || at == cut;
    }
    EXPECT_TRUE(on_boundary) << "a cut at " << cut << " passed";
  }

  // A put whose length claims more bytes than the message has.
  BatchWriter w;
  w.start(BatchHeader{kMagic, 0, 0});
  w.append_put(0, "abcd", 4);
  auto lying = w.take();
  const std::uint32_t huge = 1000;
  std::memcpy(lying.data() + sizeof(BatchHeader) + 1, &huge, 4);
  expect_refused(lying, 4096, "runs past the message");

  auto unknown = sample();
  unknown[sizeof(BatchHeader)] = std::byte{9};
  expect_refused(unknown, 4096, "unknown kind");

  auto bad_magic = sample();
  bad_magic[0] = std::byte{0};
  expect_refused(bad_magic, 4096, "unknown header");

  expect_refused(std::vector<std::byte>(3), 4096, "shorter than");
}

TEST(BatchRecords, RefusesBadAtomics) {
  auto with = [](AmoRequest r, std::size_t offset) {
    BatchWriter w;
    w.start(BatchHeader{kMagic, 0, 0});
    w.append_atomic(offset, r);
    return w.take();
  };
  expect_refused(with({AmoOp::kAdd, 3, 1, 0}, 0), 64, "width 3");
  expect_refused(with({AmoOp::kAdd, 8, 1, 0}, 4), 64, "not aligned");
  expect_refused(with({AmoOp::kSwap, 8, 1, 0}, 0), 64, "unknown atomic operation");
  expect_refused(with({AmoOp::kLoad, 8, 1, 0}, 0), 64, "unknown atomic operation");
}

}  // namespace
