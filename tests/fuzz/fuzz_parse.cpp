// Fuzzes the parsers of user-supplied text: SHMOE_STORE-style addresses (StoreAddress::parse),
// sizes (env::parse_size, SHMEM_SYMMETRIC_SIZE) and integers (env::parse_int). Bad text may only
// be refused with shmoe::Error. Accepted values are checked, not just survived:
//  * an address prints (str()) to text that parses back to the same host and port;
//  * parse_int's result lies in the range it was given;
//  * parse_size never returns more than the "too large" bound it enforces.
// Input: [selector][min and max for parse_int: 2 x 8 bytes][text].
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>
#include <utility>

#include "bootstrap/config_store.hpp"
#include "common/env.hpp"
#include "common/error.hpp"

namespace {

using shmoe::bootstrap::StoreAddress;

void fuzz_address(std::string_view text) {
  StoreAddress a = StoreAddress::parse(text);
  StoreAddress b;
  try {
    b = StoreAddress::parse(a.str());
  } catch (const shmoe::Error&) {
    std::abort();  // str() wrote text that parse() refuses
  }
  if (a.host != b.host || a.port != b.port || a.port == 0) std::abort();
}

void fuzz_size(std::string_view text) {
  std::size_t bytes = shmoe::env::parse_size(text, "SHMEM_SYMMETRIC_SIZE");
  if (bytes > std::numeric_limits<std::size_t>::max() / 2) std::abort();
}

void fuzz_int(std::string_view text, std::int64_t lo, std::int64_t hi) {
  if (lo > hi) std::swap(lo, hi);
  std::int64_t v = shmoe::env::parse_int(text, "SHMOE_SIZE", lo, hi);
  if (v < lo || v > hi) std::abort();
}

std::int64_t read_i64(const std::uint8_t* p) {
  std::int64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr std::size_t kPrefix = 1 + 16;
  if (size < kPrefix) return 0;
  std::string_view text(reinterpret_cast<const char*>(data + kPrefix), size - kPrefix);
  try {
    switch (data[0] % 3) {
      case 0:
        fuzz_address(text);
        break;
      case 1:
        fuzz_size(text);
        break;
      default:
        fuzz_int(text, read_i64(data + 1), read_i64(data + 9));
        break;
    }
  } catch (const shmoe::Error&) {
    // A refusal with a message is the expected answer to bad text.
  }
  return 0;
}
