// The config store's frame format. Every frame:
//   u32 magic 'SHMO' | u32 payload length | u8 opcode or status | payload
// little-endian. Strings are u32 length + bytes. Lengths are checked against the frame: a frame
// that is short, long, oversized or has a bad magic is rejected with WireError, never trusted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace shmoe::bootstrap::wire {

inline constexpr std::uint32_t kMagic = 0x4F4D4853;  // "SHMO"
// 2: the server speaks first (kChallenge) and the hello proves the job key (store_auth.hpp).
// 3: kWatch, and kEvent frames the server pushes unasked between replies.
inline constexpr std::uint16_t kProtocolVersion = 3;
inline constexpr std::size_t kHeaderSize = 9;

enum class Op : std::uint8_t {
  kHello = 1,
  kSet,
  kGet,
  kAdd,
  kAppend,
  kCas,
  kRemove,
  kStatus,
  kBye,
  // Asks for one kEvent frame (key, value) once the key has a value: at once if it has one.
  kWatch,
};
enum class Status : std::uint8_t {
  kOk = 0,
  kTimeout,
  kNotFound,
  kCasFailed,
  kRefused,
  kBadRequest,
  kChallenge,  // the server's first frame on every connection
  kEvent,      // pushed for a kWatch, at any frame boundary; never the reply to a request
};

class WireError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct FrameHeader {
  std::uint32_t length = 0;
  std::uint8_t code = 0;
};

// Parses the 9-byte header; throws WireError on bad magic or length > max_payload.
FrameHeader parse_header(const std::uint8_t* bytes, std::size_t max_payload);

class Writer {
 public:
  explicit Writer(std::uint8_t code);
  Writer& u8(std::uint8_t v);
  Writer& u16(std::uint16_t v);
  Writer& u32(std::uint32_t v);
  Writer& i32(std::int32_t v);
  Writer& i64(std::int64_t v);
  Writer& str(std::string_view v);
  // The finished frame, header included.
  const std::string& frame();

 private:
  std::string buf_;
};

class Reader {
 public:
  explicit Reader(std::string_view payload) : data_(payload) {}
  std::uint8_t u8();
  std::uint16_t u16();
  std::uint32_t u32();
  std::int32_t i32();
  std::int64_t i64();
  std::string_view str();
  bool done() const { return pos_ == data_.size(); }
  // Bytes consumed so far: what precedes the next field.
  std::size_t offset() const { return pos_; }
  // Throws unless the whole payload was consumed.
  void expect_end() const;

 private:
  std::string_view take(std::size_t n);
  std::string_view data_;
  std::size_t pos_ = 0;
};

}  // namespace shmoe::bootstrap::wire
