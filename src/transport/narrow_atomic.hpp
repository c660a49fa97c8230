// 1- and 2-byte AMOs for transports whose atomics are 4 or 8 bytes wide (UCX): the operation is
// carried out on the aligned 32-bit word that holds the lane, by compare-and-swap, leaving the
// word's other bytes as they are even while other PEs change them.
#pragma once

#include <cstdint>

#include "transport/transport.hpp"

namespace shmoe::transport {

// `at`: the lane's first byte within the word (little-endian), a multiple of the request's
// width. `old`: the word as last read. `cas(desired, expected)` swaps the word to `desired` if it
// holds `expected` and returns what it held. Returns the lane's previous value.
template <typename Cas>
std::uint64_t narrow_atomic(unsigned at, const AmoRequest& r, std::uint32_t old, Cas&& cas) {
  const unsigned shift = at * 8;
  const std::uint32_t lane = r.width == 1 ? 0xffu : 0xffffu;
  const std::uint32_t mask = lane << shift;
  auto part = [&](std::uint32_t w) { return (w >> shift) & lane; };
  const std::uint32_t operand = static_cast<std::uint32_t>(r.operand) & lane;
  for (;;) {
    std::uint32_t next = 0;
    switch (r.op) {
      case AmoOp::kLoad:
        return part(old);
      case AmoOp::kCompareSwap:
        if (part(old) != (static_cast<std::uint32_t>(r.compare) & lane)) return part(old);
        next = operand;
        break;
      case AmoOp::kStore:
      case AmoOp::kSwap:
        next = operand;
        break;
      case AmoOp::kAdd:
        next = (part(old) + operand) & lane;
        break;
      case AmoOp::kAnd:
        next = part(old) & operand;
        break;
      case AmoOp::kOr:
        next = part(old) | operand;
        break;
      case AmoOp::kXor:
        next = part(old) ^ operand;
        break;
    }
    const std::uint32_t desired = (old & ~mask) | (next << shift);
    const std::uint32_t seen = cas(desired, old);
    if (seen == old) return part(old);
    old = seen;  // another PE changed the word (perhaps a neighbouring byte): try again
  }
}

}  // namespace shmoe::transport
