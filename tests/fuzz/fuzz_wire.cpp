// Fuzzes the config store's frame parser, which reads bytes from any peer that connects.
// Input: [n][limit / 16][n field codes][frame bytes]. The frame's 9-byte header goes through
// parse_header, its payload through a Reader that reads the n fields in order. A hostile frame may
// only be refused with WireError; anything else escaping (or a sanitizer report) is a finding.
//
// The fields read successfully are written back with Writer and must reproduce the bytes they
// came from: a parser that "succeeds" but reads the wrong bytes would pass a crash-only fuzzer.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "bootstrap/wire.hpp"

namespace wire = shmoe::bootstrap::wire;

namespace {

enum Field : std::uint8_t { kU8, kU16, kU32, kI32, kI64, kStr, kEnd, kFieldCount };

// Reads one field and appends its re-encoding to `echo`.
void read_field(Field f, wire::Reader& r, wire::Writer& echo) {
  switch (f) {
    case kU8:
      echo.u8(r.u8());
      break;
    case kU16:
      echo.u16(r.u16());
      break;
    case kU32:
      echo.u32(r.u32());
      break;
    case kI32:
      echo.i32(r.i32());
      break;
    case kI64:
      echo.i64(r.i64());
      break;
    case kStr:
      echo.str(r.str());
      break;
    default:
      r.expect_end();
      break;
  }
}

void check_echo(wire::Writer& echo, std::string_view payload) {
  const std::string& frame = echo.frame();
  std::string_view consumed = std::string_view(frame).substr(wire::kHeaderSize);
  if (payload.substr(0, consumed.size()) != consumed) std::abort();
}

void fuzz_payload(std::string_view script, std::string_view payload) {
  wire::Reader reader(payload);
  wire::Writer echo(0);
  try {
    for (unsigned char code : script)
      read_field(static_cast<Field>(code % kFieldCount), reader, echo);
  } catch (const wire::WireError&) {
    // A refusal; what was read before it must still be right.
  }
  check_echo(echo, payload);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::size_t n = std::min<std::size_t>(data[0], size - 2);
  // The limit comes from the input so both sides of the length check are reached.
  const std::size_t limit = data[1] * 16u;
  std::string_view script(reinterpret_cast<const char*>(data + 2), n);
  std::string_view frame(reinterpret_cast<const char*>(data + 2 + n), size - 2 - n);
  std::string_view payload = frame;
  if (frame.size() >= wire::kHeaderSize) {
    try {
      wire::FrameHeader h =
          wire::parse_header(reinterpret_cast<const std::uint8_t*>(frame.data()), limit);
      if (h.length > limit) std::abort();  // the header promised to refuse this
      payload = frame.substr(wire::kHeaderSize, h.length);
    } catch (const wire::WireError&) {
      payload = frame.substr(wire::kHeaderSize);  // the Reader must cope with it anyway
    }
  }
  fuzz_payload(script, payload);
  return 0;
}
