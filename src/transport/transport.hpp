// The one small interface between the SHMEM API layer and whatever moves bytes between PEs.
// Addresses are (pe, offset into that PE's symmetric segment): every transport can name them the
// same way. Values of atomics travel as bit patterns of 1, 2, 4 or 8 bytes, because OpenSHMEM's
// AMOs (integer add/and/or/xor, and fetch/set/swap/compare-swap of any type) act on bits alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace shmoe::transport {

enum class AmoOp : std::uint8_t { kLoad, kStore, kSwap, kCompareSwap, kAdd, kAnd, kOr, kXor };

struct AmoRequest {
  AmoOp op = AmoOp::kLoad;
  std::uint8_t width = 8;  // bytes: 1, 2, 4 or 8
  std::uint64_t operand = 0;
  std::uint64_t compare = 0;  // kCompareSwap only
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string_view name() const = 0;

  // A pointer that loads and stores reach PE `pe`'s segment through, or nullptr if there is none
  // (a PE on another host).
  virtual std::byte* direct_base(int pe) const = 0;

  // Blocking from the caller's view: `src` may be reused on return. Completion at the target is
  // guaranteed by quiet(); ordering between two operations to one PE by fence().
  virtual void put(int pe, std::size_t offset, const void* src, std::size_t bytes) = 0;
  // Returns when `dst` holds the data.
  virtual void get(int pe, std::size_t offset, void* dst, std::size_t bytes) = 0;
  // The _nbi forms: `src` must stay untouched, and `dst` holds the data, only after quiet().
  // A transport whose operations complete on return needs nothing more than the blocking forms.
  virtual void put_nbi(int pe, std::size_t offset, const void* src, std::size_t bytes) {
    put(pe, offset, src, bytes);
  }
  virtual void get_nbi(int pe, std::size_t offset, void* dst, std::size_t bytes) {
    get(pe, offset, dst, bytes);
  }
  // Performs the operation atomically with respect to every other atomic on that word and
  // returns the previous value (the loaded value for kLoad).
  virtual std::uint64_t atomic(int pe, std::size_t offset, const AmoRequest& request) = 0;
  virtual void fence() = 0;
  virtual void quiet() = 0;
};

}  // namespace shmoe::transport
