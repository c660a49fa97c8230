#include "numeric/fp8.hpp"

namespace shmoe::numeric {
namespace {

constexpr std::array<float, 256> make_decode_table(Fp8Format f) {
  std::array<float, 256> t{};
  for (unsigned c = 0; c < 256; ++c) t[c] = decode_fp8(static_cast<std::uint8_t>(c), f);
  return t;
}

// Built at compile time, so there is no initialisation order to worry about.
constexpr std::array<float, 256> kE4M3Table = make_decode_table(Fp8Format::kE4M3);
constexpr std::array<float, 256> kE5M2Table = make_decode_table(Fp8Format::kE5M2);

}  // namespace

const std::array<float, 256>& fp8_decode_table(Fp8Format f) {
  return f == Fp8Format::kE4M3 ? kE4M3Table : kE5M2Table;
}

}  // namespace shmoe::numeric
