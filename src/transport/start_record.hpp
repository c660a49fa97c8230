// The records PEs exchange through the config store while the transports start (host, segment
// names, UCX addresses and keys): fields in the store's own wire encoding, length-prefixed and
// little-endian, so binary values need no text form and a short or long record is refused.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "bootstrap/wire.hpp"
#include "common/error.hpp"

namespace shmoe::transport {

using bootstrap::wire::Reader;
using bootstrap::wire::Writer;

// A record's fields are a wire frame's payload; `write` fills a Writer.
template <typename Write>
std::string encode_record(Write&& write) {
  Writer w(0);
  write(w);
  return w.frame().substr(bootstrap::wire::kHeaderSize);
}

// Decodes PE `pe`'s record of kind `what` with `read(Reader&)`, which must consume all of it.
template <typename Read>
auto decode_record(std::string_view text, int pe, const char* what, Read&& read) {
  try {
    Reader r(text);
    auto value = read(r);
    r.expect_end();
    return value;
  } catch (const bootstrap::wire::WireError& e) {
    throw make_error("malformed {} start-up record from PE {}: {}", what, pe, e.what());
  }
}

}  // namespace shmoe::transport
