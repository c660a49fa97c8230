// The collective algorithms on a Team, over the transport's put/atomic and the team's symmetric
// scratch. Every one is O(log n) rounds of puts and flag signals per PE (alltoall: the n-1
// puts it must make anyway), never n PEs reading from one root, and ends with the team barrier:
// once any PE leaves, every member has finished with every flag and buffer of the call, so the
// next call may reuse them with other partners.
//
// Flags hold the sequence number of the phase that last wrote them (Team::next_seq) and are
// waited on with >=, so they never need resetting.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "shmem/team.hpp"

namespace shmoe::collectives {

// dest is symmetric (written by peers at its offset); source is only read by its own PE.
// `root_gets_copy`: the team form updates dest on the root too, the active-set form does not.
void broadcast(Team& team, void* dest, const void* source, std::size_t bytes, int root,
               bool root_gets_copy);
// Each PE's `bytes` (equal everywhere) land at dest + index * bytes on every PE.
void fcollect(Team& team, void* dest, const void* source, std::size_t bytes);
// Each PE's `bytes` (may differ) land in index order, packed, on every PE.
void collect(Team& team, void* dest, const void* source, std::size_t bytes);
// Block j of source (bytes each) goes to PE j at dest + my_index * bytes.
void alltoall(Team& team, void* dest, const void* source, std::size_t bytes);
// As alltoall, for `nelems` elements of `elem` bytes at strides dst and sst (in elements).
void alltoalls(Team& team, void* dest, const void* source, std::ptrdiff_t dst, std::ptrdiff_t sst,
               std::size_t nelems, std::size_t elem);
void reduce_or_u64(Team& team, std::uint64_t* dest, const std::uint64_t* source, std::size_t n);

// Ends every collective: this PE's puts are done, then the team barrier.
void finish(Team& team);

// ---- Reductions -----------------------------------------------------------------------------
// Recursive doubling: ceil(log2 n) exchanges per chunk of kChunkBytes (plus a fold into and out
// of the largest power of two when n is not one). Chunks alternate between two buffers: a
// partner can be at most one chunk ahead, since each exchange needs the other side's data.
// Every PE combines the same operands in a commutative order, so all end with identical bits.
inline constexpr std::size_t kChunkBytes = 1024;
inline constexpr int kReduceSlots = 18;  // 16 rounds, fold, unfold
static_assert(2 * kReduceSlots * kChunkBytes <= TeamScratch::kDataBytes);

struct And {
  template <typename T>
  T operator()(T a, T b) const {
    return a & b;
  }
};
struct Or {
  template <typename T>
  T operator()(T a, T b) const {
    return a | b;
  }
};
struct Xor {
  template <typename T>
  T operator()(T a, T b) const {
    return a ^ b;
  }
};
struct Max {
  template <typename T>
  T operator()(T a, T b) const {
    return a < b ? b : a;
  }
};
struct Min {
  template <typename T>
  T operator()(T a, T b) const {
    return b < a ? b : a;
  }
};
// Integer sums and products wrap (as the unsigned type) instead of overflowing.
struct Sum {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    } else {
      return a + b;
    }
  }
};
struct Prod {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using U =
          std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
      return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    } else {
      return a * b;
    }
  }
};

namespace detail {
std::size_t reduce_slot_offset(const Team& team, std::uint64_t seq, int slot);
const std::byte* reduce_slot_local(const Team& team, std::uint64_t seq, int slot);
void reduce_send(Team& team, int to, std::uint64_t seq, int slot, int flag, const void* data,
                 std::size_t bytes);
}  // namespace detail

// dest and source may be the same array; neither needs to be symmetric.
template <typename T, typename Op>
void reduce(Team& team, T* dest, const T* source, std::size_t n) {
  if (n == 0) return;
  const int size = team.size(), me = team.my_index();
  if (size == 1) {
    if (dest != source) std::memmove(dest, source, n * sizeof(T));
    return;
  }
  int p2 = 1, rounds = 0;
  while (p2 * 2 <= size) {
    p2 *= 2;
    ++rounds;
  }
  const Op op;
  const std::size_t per_chunk = std::max<std::size_t>(1, kChunkBytes / sizeof(T));
  std::vector<T> acc(std::min(n, per_chunk)), in(acc.size());
  auto combine = [&](std::uint64_t seq, int slot, std::size_t m) {
    std::memcpy(in.data(), detail::reduce_slot_local(team, seq, slot), m * sizeof(T));
    for (std::size_t i = 0; i < m; ++i) acc[i] = op(acc[i], in[i]);
  };
  for (std::size_t first = 0; first < n; first += per_chunk) {
    const std::size_t m = std::min(per_chunk, n - first);
    const std::size_t bytes = m * sizeof(T);
    const std::uint64_t seq = team.next_seq();
    std::memcpy(acc.data(), source + first, bytes);
    if (me >= p2) {  // folded into me - p2, which hands the result back
      detail::reduce_send(team, me - p2, seq, 16, TeamScratch::kFoldFlag, acc.data(), bytes);
      team.wait(TeamScratch::kUnfoldFlag, seq, "reduction (result from the folding partner)");
      std::memcpy(acc.data(), detail::reduce_slot_local(team, seq, 17), bytes);
    } else {
      const bool folds = me + p2 < size;
      if (folds) {
        team.wait(TeamScratch::kFoldFlag, seq, "reduction (fold)");
        combine(seq, 16, m);
      }
      for (int r = 0; r < rounds; ++r) {
        detail::reduce_send(team, me ^ (1 << r), seq, r, r, acc.data(), bytes);
        team.wait(r, seq, "reduction (recursive doubling)");
        combine(seq, r, m);
      }
      if (folds) {
        detail::reduce_send(team, me + p2, seq, 17, TeamScratch::kUnfoldFlag, acc.data(), bytes);
      }
    }
    std::memcpy(dest + first, acc.data(), bytes);
  }
  finish(team);
}

// ---- Scans (prefix reductions) ---------------------------------------------------------------
// Recursive doubling along the team (Hillis-Steele): in round r every PE sends what it has summed
// so far to the PE 2^r above it and adds in what the PE 2^r below sent, ceil(log2 n) rounds per
// chunk. What a PE receives are the sums of disjoint runs of the PEs below it, so their sum alone
// is the exclusive scan. The lowest PEs receive nothing and could run ahead by more chunks than
// the two alternating buffers hold, so the team synchronizes after every second chunk.
// `exclusive`: PE 0 gets Op's identity, value-initialized T (the scans are sums).
template <typename T, typename Op>
void scan(Team& team, T* dest, const T* source, std::size_t n, bool exclusive) {
  if (n == 0) return;
  const int size = team.size(), me = team.my_index();
  const Op op;
  const std::size_t per_chunk = std::max<std::size_t>(1, kChunkBytes / sizeof(T));
  std::vector<T> acc(std::min(n, per_chunk)), below(acc.size()), in(acc.size());
  std::size_t chunk = 0;
  for (std::size_t first = 0; first < n; first += per_chunk, ++chunk) {
    if (chunk > 0 && chunk % 2 == 0) team.sync();  // every PE has read the chunks before
    const std::size_t m = std::min(per_chunk, n - first);
    const std::size_t bytes = m * sizeof(T);
    const std::uint64_t seq = team.next_seq();
    std::memcpy(acc.data(), source + first, bytes);
    std::fill(below.begin(), below.begin() + m, T{});
    int r = 0;
    for (int dist = 1; dist < size; dist *= 2, ++r) {
      if (me + dist < size) detail::reduce_send(team, me + dist, seq, r, r, acc.data(), bytes);
      if (me >= dist) {
        team.wait(r, seq, "scan (recursive doubling)", me - dist);
        std::memcpy(in.data(), detail::reduce_slot_local(team, seq, r), bytes);
        // The PEs below come first in the sum, so the combined order is the team's.
        for (std::size_t i = 0; i < m; ++i) {
          acc[i] = op(in[i], acc[i]);
          below[i] = op(in[i], below[i]);
        }
      }
    }
    std::memcpy(dest + first, exclusive ? below.data() : acc.data(), bytes);
  }
  finish(team);
}

}  // namespace shmoe::collectives
