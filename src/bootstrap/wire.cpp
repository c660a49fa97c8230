#include "bootstrap/wire.hpp"

#include <string>
#include <type_traits>

namespace shmoe::bootstrap::wire {
namespace {

// Byte-by-byte so the format is little-endian whatever the host order, and so unaligned input
// buffers are never dereferenced as wider types.
template <typename T>
void put_le(std::string& buf, T v) {
  using U = std::make_unsigned_t<T>;
  U u = static_cast<U>(v);
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    buf.push_back(static_cast<char>(static_cast<std::uint8_t>(u >> (8 * i))));
  }
}

template <typename T>
T get_le(const std::uint8_t* p) {
  using U = std::make_unsigned_t<T>;
  U u = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) u |= static_cast<U>(static_cast<U>(p[i]) << (8 * i));
  return static_cast<T>(u);
}

}  // namespace

FrameHeader parse_header(const std::uint8_t* bytes, std::size_t max_payload) {
  std::uint32_t magic = get_le<std::uint32_t>(bytes);
  if (magic != kMagic) {
    throw WireError("bad frame magic (not a shmoe config store peer?)");
  }
  FrameHeader h;
  h.length = get_le<std::uint32_t>(bytes + 4);
  h.code = bytes[8];
  if (h.length > max_payload) {
    throw WireError("frame payload of " + std::to_string(h.length) +
                    " bytes exceeds the limit of " + std::to_string(max_payload));
  }
  return h;
}

Writer::Writer(std::uint8_t code) {
  buf_.reserve(64);
  put_le<std::uint32_t>(buf_, kMagic);
  put_le<std::uint32_t>(buf_, 0);  // patched by frame()
  buf_.push_back(static_cast<char>(code));
}

Writer& Writer::u8(std::uint8_t v) {
  buf_.push_back(static_cast<char>(v));
  return *this;
}
Writer& Writer::u16(std::uint16_t v) {
  put_le(buf_, v);
  return *this;
}
Writer& Writer::u32(std::uint32_t v) {
  put_le(buf_, v);
  return *this;
}
Writer& Writer::i32(std::int32_t v) {
  put_le(buf_, v);
  return *this;
}
Writer& Writer::i64(std::int64_t v) {
  put_le(buf_, v);
  return *this;
}
Writer& Writer::str(std::string_view v) {
  if (v.size() > UINT32_MAX) throw WireError("string too long for a frame");
  put_le<std::uint32_t>(buf_, static_cast<std::uint32_t>(v.size()));
  buf_.append(v);
  return *this;
}

const std::string& Writer::frame() {
  std::size_t payload = buf_.size() - kHeaderSize;
  if (payload > UINT32_MAX) throw WireError("frame too long");
  std::uint32_t len = static_cast<std::uint32_t>(payload);
  for (std::size_t i = 0; i < 4; ++i)
    buf_[4 + i] = static_cast<char>(static_cast<std::uint8_t>(len >> (8 * i)));
  return buf_;
}

std::string_view Reader::take(std::size_t n) {
  // Compared as "n > remaining" so a huge n from a hostile length field cannot overflow pos_ + n.
  if (n > data_.size() - pos_) {
    throw WireError("truncated frame: needed " + std::to_string(n) + " more bytes at offset " +
                    std::to_string(pos_) + " of " + std::to_string(data_.size()));
  }
  std::string_view out = data_.substr(pos_, n);
  pos_ += n;
  return out;
}

std::uint8_t Reader::u8() {
  return static_cast<std::uint8_t>(take(1)[0]);
}
std::uint16_t Reader::u16() {
  return get_le<std::uint16_t>(reinterpret_cast<const std::uint8_t*>(take(2).data()));
}
std::uint32_t Reader::u32() {
  return get_le<std::uint32_t>(reinterpret_cast<const std::uint8_t*>(take(4).data()));
}
std::int32_t Reader::i32() {
  return get_le<std::int32_t>(reinterpret_cast<const std::uint8_t*>(take(4).data()));
}
std::int64_t Reader::i64() {
  return get_le<std::int64_t>(reinterpret_cast<const std::uint8_t*>(take(8).data()));
}
std::string_view Reader::str() {
  std::uint32_t n = u32();
  return take(n);
}

void Reader::expect_end() const {
  if (!done()) {
    throw WireError("frame has " + std::to_string(data_.size() - pos_) +
                    " unexpected trailing bytes");
  }
}

}  // namespace shmoe::bootstrap::wire
