#include "shmem/collectives.hpp"

#include <bit>

#include "shmem/runtime.hpp"

namespace shmoe::collectives {
namespace {

std::size_t offset_of(const Team& team, const void* p) {
  return team.runtime().offset_of(p);
}

// Bruck's allgather on fixed-size blocks placed at their absolute positions: in round r each PE
// passes the blocks it holds (its own and the next 2^r - 1) to the PE 2^r places behind, so
// after ceil(log2 n) rounds everyone holds all n. `block_offset(i)` is where block i starts
// (bytes, relative to `base`), `block_offset(n)` the end.
template <typename BlockOffset>
void bruck(Team& team, std::byte* base, std::size_t base_offset, BlockOffset block_offset,
           const char* what) {
  const int n = team.size(), me = team.my_index();
  const std::uint64_t seq = team.next_seq();
  auto& t = team.transport();
  for (int r = 0; (1 << r) < n; ++r) {
    const int dist = 1 << r;
    const int count = std::min(dist, n - dist);
    const int to = (me - dist + n) % n;
    const int to_pe = team.world_pe(to);
    // Blocks me .. me+count-1 (mod n): one run, or two when they wrap past the end.
    auto send_run = [&](int from, int end) {
      std::size_t lo = block_offset(from), hi = block_offset(end);
      if (hi > lo) t.put(nullptr, to_pe, base_offset + lo, base + lo, hi - lo);
    };
    if (me + count <= n) {
      send_run(me, me + count);
    } else {
      send_run(me, n);
      send_run(0, me + count - n);
    }
    team.signal(to, r, seq);
    team.wait(r, seq, what, (me + dist) % n);
  }
}

}  // namespace

void finish(Team& team) {
  team.transport().quiet(nullptr);
  team.sync();
}

void broadcast(Team& team, void* dest, const void* source, std::size_t bytes, int root,
               bool root_gets_copy) {
  if (bytes == 0) return;
  const int n = team.size();
  const int v = (team.my_index() - root + n) % n;  // index in the tree rooted at `root`
  const std::uint64_t seq = team.next_seq();
  const void* from = source;
  if (v == 0) {
    if (root_gets_copy && dest != source) std::memmove(dest, source, bytes);
  } else {
    // The parent in the binomial tree: v with its highest set bit cleared.
    const int parent = (std::bit_floor(static_cast<unsigned>(v)) ^ v) + root;
    team.wait(TeamScratch::kTreeFlag, seq, "broadcast (data from the parent in the tree)",
              parent % n);
    from = dest;
  }
  // Binomial tree: node v sends to v + 2^k for every 2^k > v, largest subtree first.
  int top = 1;
  while (top < n) top <<= 1;
  auto& t = team.transport();
  const std::size_t off = offset_of(team, dest);
  for (int k = top >> 1; k > v; k >>= 1) {
    const int child = v + k;
    if (child >= n) continue;
    const int child_index = (child + root) % n;
    t.put(nullptr, team.world_pe(child_index), off, from, bytes);
    team.signal(child_index, TeamScratch::kTreeFlag, seq);
  }
  finish(team);
}

void fcollect(Team& team, void* dest, const void* source, std::size_t bytes) {
  if (bytes == 0) return;
  auto* base = static_cast<std::byte*>(dest);
  std::memcpy(base + team.my_index() * bytes, source, bytes);
  bruck(
      team, base, offset_of(team, dest), [&](int i) { return static_cast<std::size_t>(i) * bytes; },
      "fcollect");
  finish(team);
}

void collect(Team& team, void* dest, const void* source, std::size_t bytes) {
  const int n = team.size(), me = team.my_index();
  if (static_cast<std::size_t>(n) * sizeof(std::uint64_t) > TeamScratch::kDataBytes) {
    api_error("shmem_collect", "teams of more than {} PEs are not supported",
              TeamScratch::kDataBytes / sizeof(std::uint64_t));
  }
  // First every PE learns every contribution's size (Bruck on the team's scratch).
  auto* sizes = reinterpret_cast<std::uint64_t*>(team.local_data());
  sizes[me] = bytes;
  bruck(
      team, team.local_data(), team.data_offset(),
      [&](int i) { return static_cast<std::size_t>(i) * sizeof(std::uint64_t); },
      "collect (sizes)");
  std::vector<std::size_t> start(n + 1, 0);
  for (int i = 0; i < n; ++i) start[i + 1] = start[i] + sizes[i];
  if (start[n] > 0) {
    auto* base = static_cast<std::byte*>(dest);
    std::memcpy(base + start[me], source, bytes);
    bruck(
        team, base, offset_of(team, dest), [&](int i) { return start[i]; }, "collect");
  }
  finish(team);
}

void alltoall(Team& team, void* dest, const void* source, std::size_t bytes) {
  const int n = team.size(), me = team.my_index();
  auto* out = static_cast<std::byte*>(dest);
  const auto* in = static_cast<const std::byte*>(source);
  const std::size_t off = offset_of(team, dest);
  std::memcpy(out + me * bytes, in + me * bytes, bytes);
  // Everyone starts with its right neighbour, so no PE is every PE's first target.
  for (int k = 1; k < n; ++k) {
    const int j = (me + k) % n;
    team.transport().put(nullptr, team.world_pe(j), off + me * bytes, in + j * bytes, bytes);
  }
  finish(team);
}

void alltoalls(Team& team, void* dest, const void* source, std::ptrdiff_t dst, std::ptrdiff_t sst,
               std::size_t nelems, std::size_t elem) {
  const int n = team.size(), me = team.my_index();
  const auto* in = static_cast<const std::byte*>(source);
  const std::size_t off = offset_of(team, dest);
  for (int k = 0; k < n; ++k) {
    const int j = (me + k) % n;
    const int pe = team.world_pe(j);
    for (std::size_t i = 0; i < nelems; ++i) {
      std::size_t to = ((static_cast<std::size_t>(me) * nelems * dst) + i * dst) * elem;
      std::size_t from = ((static_cast<std::size_t>(j) * nelems * sst) + i * sst) * elem;
      team.transport().put(nullptr, pe, off + to, in + from, elem);
    }
  }
  finish(team);
}

void reduce_or_u64(Team& team, std::uint64_t* dest, const std::uint64_t* source, std::size_t n) {
  reduce<std::uint64_t, Or>(team, dest, source, n);
}

namespace detail {

std::size_t reduce_slot_offset(const Team& team, std::uint64_t seq, int slot) {
  return team.data_offset() + ((seq & 1) * kReduceSlots + slot) * kChunkBytes;
}

const std::byte* reduce_slot_local(const Team& team, std::uint64_t seq, int slot) {
  return team.local_data() + (reduce_slot_offset(team, seq, slot) - team.data_offset());
}

void reduce_send(Team& team, int to, std::uint64_t seq, int slot, int flag, const void* data,
                 std::size_t bytes) {
  team.transport().put(nullptr, team.world_pe(to), reduce_slot_offset(team, seq, slot), data,
                       bytes);
  team.signal(to, flag, seq);
}

}  // namespace detail
}  // namespace shmoe::collectives
