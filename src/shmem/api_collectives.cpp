// Collective routines (OpenSHMEM 1.5 section 9.9) on teams, and the deprecated active-set forms,
// which run the same algorithms on an internal team per active set (team.hpp): their pSync and
// pWrk arguments are accepted and never touched.
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <set>
#include <string>

#include "common/log.hpp"
#include "shmem/agreement.hpp"
#include "shmem/collectives.hpp"
#include "shmem/profiling.hpp"
#include "shmem/runtime.hpp"

namespace {

namespace coll = shmoe::collectives;
using shmoe::Team;

// The team of a team-based call with its lock held, or nullptr (the call returns nonzero).
struct Locked {
  Team* team = nullptr;
  std::unique_lock<std::mutex> lock;
};

Locked lock_team(shmem_team_t handle, const char* fn) {
  Locked l;
  l.team = shmoe::runtime(fn).teams().resolve(handle, fn, "team");
  if (l.team != nullptr) l.lock = std::unique_lock(l.team->mutex());
  return l;
}

// `count` items of `size` bytes (runtime.hpp's checked_bytes, with the parameter named second).
std::size_t bytes_of(const char* fn, const char* what, std::size_t count, std::size_t size) {
  return shmoe::checked_bytes(fn, what, count, size);
}

// dest must be symmetric for all its bytes (a stack array, or a count that runs past the heap,
// is refused by name instead of written).
void check_dest(Team& team, const void* dest, std::size_t bytes, const char* fn) {
  if (bytes > 0) shmoe::symmetric_offset(team.runtime(), dest, bytes, fn, "dest");
}

// A reduction's dest must be symmetric (OpenSHMEM 1.5 section 9.9.9), and a symmetric one must
// hold all its elements (a count past the heap is refused by name). A private dest (a stack
// variable) works here, since reductions go through the team's scratch, and programs in the
// wild pass one; so it is refused only under SHMOE_DEBUG, and otherwise said once per call name.
void check_reduce_dest(Team& team, const void* dest, std::size_t bytes, const char* fn) {
  const auto& rt = team.runtime();
  if (rt.is_symmetric(dest, 1) || rt.config().debug_allocations) {
    check_dest(team, dest, bytes, fn);
    return;
  }
  static std::mutex mutex;
  static std::set<std::string> told;
  std::lock_guard lock(mutex);
  if (told.insert(fn).second) {
    shmoe::log::warn(
        "{}: dest={} is not symmetric (OpenSHMEM requires a symmetric dest; shmoe accepts this "
        "one, and refuses it under SHMOE_DEBUG=1); said once",
        fn, dest);
  }
}

// Under SHMOE_DEBUG, every member passed the same `values` (the specification requires it: a
// count or root that differs corrupts memory or hangs), checked by one agreement and refused by
// name on every member. Off, it costs one load.
void check_same(Team& team, const char* fn, std::initializer_list<shmoe::AgreedValue> values) {
  if (!team.runtime().config().debug_allocations) return;
  const std::string verdict =
      shmoe::agree_on(team, fn, nullptr, values.begin(), static_cast<int>(values.size()));
  if (!verdict.empty()) shmoe::log::fatal(verdict);
}

int broadcast(const char* fn, shmem_team_t handle, void* dest, const void* source,
              std::size_t bytes, int root) {
  auto l = lock_team(handle, fn);
  if (l.team == nullptr || root < 0 || root >= l.team->size()) return -1;
  check_same(*l.team, fn,
             {{"PE_root", root}, {"nelems (bytes)", static_cast<std::int64_t>(bytes)}});
  if (bytes == 0) return 0;
  check_dest(*l.team, dest, bytes, fn);
  coll::broadcast(*l.team, dest, source, bytes, root, true);
  return 0;
}

int fcollect(const char* fn, shmem_team_t handle, void* dest, const void* source,
             std::size_t bytes) {
  auto l = lock_team(handle, fn);
  if (l.team == nullptr) return -1;
  check_same(*l.team, fn, {{"nelems (bytes)", static_cast<std::int64_t>(bytes)}});
  if (bytes == 0) return 0;
  check_dest(*l.team, dest, bytes_of(fn, "nelems", bytes, l.team->size()), fn);
  coll::fcollect(*l.team, dest, source, bytes);
  return 0;
}

int collect(const char* fn, shmem_team_t handle, void* dest, const void* source,
            std::size_t bytes) {
  auto l = lock_team(handle, fn);
  if (l.team == nullptr) return -1;
  check_dest(*l.team, dest, bytes, fn);  // the whole extent is known only inside
  coll::collect(*l.team, dest, source, bytes);
  return 0;
}

int alltoall(const char* fn, shmem_team_t handle, void* dest, const void* source,
             std::size_t bytes) {
  auto l = lock_team(handle, fn);
  if (l.team == nullptr) return -1;
  check_same(*l.team, fn, {{"nelems (bytes)", static_cast<std::int64_t>(bytes)}});
  if (bytes == 0) return 0;
  check_dest(*l.team, dest, bytes_of(fn, "nelems", bytes, l.team->size()), fn);
  coll::alltoall(*l.team, dest, source, bytes);
  return 0;
}

void check_strides(ptrdiff_t dst, ptrdiff_t sst, const char* fn) {
  if (dst < 1 || sst < 1) {
    shmoe::api_error(fn, "dst={} and sst={} must be positive strides (in elements)", dst, sst);
  }
}

int alltoalls(const char* fn, shmem_team_t handle, void* dest, const void* source, ptrdiff_t dst,
              ptrdiff_t sst, std::size_t nelems, std::size_t elem) {
  auto l = lock_team(handle, fn);
  if (l.team == nullptr) return -1;
  check_same(*l.team, fn,
             {{"dst", dst}, {"sst", sst}, {"nelems", static_cast<std::int64_t>(nelems)}});
  if (nelems == 0) return 0;
  check_strides(dst, sst, fn);
  const std::size_t blocks = bytes_of(fn, "nelems", nelems, l.team->size());
  const std::size_t span = bytes_of(fn, "nelems", blocks - 1, static_cast<std::size_t>(dst)) + 1;
  check_dest(*l.team, dest, bytes_of(fn, "nelems", span, elem), fn);
  coll::alltoalls(*l.team, dest, source, dst, sst, nelems, elem);
  return 0;
}

template <typename T, typename Op>
int reduce(const char* fn, shmem_team_t handle, T* dest, const T* source, std::size_t n) {
  auto l = lock_team(handle, fn);
  if (l.team == nullptr) return -1;
  check_same(*l.team, fn, {{"nreduce", static_cast<std::int64_t>(n)}});
  if (n == 0) return 0;
  check_reduce_dest(*l.team, dest, bytes_of(fn, "nreduce", n, sizeof(T)), fn);
  coll::reduce<T, Op>(*l.team, dest, source, n);
  return 0;
}

// OpenSHMEM 1.6 (9.10.10): dest and source are one array (in place) or disjoint; a partial overlap
// would read elements already overwritten, so it is refused by name.
template <typename T>
int sum_scan(const char* fn, shmem_team_t handle, T* dest, const T* source, std::size_t n,
             bool exclusive) {
  auto l = lock_team(handle, fn);
  if (l.team == nullptr) return -1;
  check_same(*l.team, fn, {{"nelems", static_cast<std::int64_t>(n)}});
  if (n == 0) return 0;
  const std::size_t bytes = bytes_of(fn, "nelems", n, sizeof(T));
  const auto d = reinterpret_cast<std::uintptr_t>(dest),
             s = reinterpret_cast<std::uintptr_t>(source);
  if (d != s && d < s + bytes && s < d + bytes) {
    shmoe::api_error(fn,
                     "dest={} and source={} overlap in part ({} bytes each): they must be the same "
                     "array or disjoint",
                     static_cast<const void*>(dest), static_cast<const void*>(source), bytes);
  }
  check_reduce_dest(*l.team, dest, bytes, fn);
  coll::scan<T, coll::Sum>(*l.team, dest, source, n, exclusive);
  return 0;
}

// ---- Active sets ------------------------------------------------------------------------------

shmoe::ActiveSetCall active_set(const char* fn, int start, int log_stride, int size) {
  auto& rt = shmoe::runtime(fn);
  if (start < 0 || size < 1 || log_stride < 0 || log_stride > 30) {
    shmoe::api_error(fn, "PE_start={}, logPE_stride={}, PE_size={} is not an active set", start,
                     log_stride, size);
  }
  const long stride = 1L << log_stride;
  const long last = start + stride * (size - 1);
  if (last >= rt.size()) {
    shmoe::api_error(fn,
                     "the active set PE_start={}, logPE_stride={}, PE_size={} reaches PE {}, "
                     "beyond the last PE {}",
                     start, log_stride, size, last, rt.size() - 1);
  }
  if (rt.rank() < start || (rt.rank() - start) % stride != 0 || rt.rank() > last) {
    shmoe::api_error(fn, "PE {} is not in the active set PE_start={}, logPE_stride={}, PE_size={}",
                     rt.rank(), start, log_stride, size);
  }
  return rt.teams().active_set(shmoe::PeSet{start, static_cast<int>(stride), size}, fn);
}

}  // namespace

extern "C" {

#define SHMOE_DEF_TEAM_COLL(T, N)                                                                \
  int pshmem_##N##_broadcast(shmem_team_t team, T* dest, const T* source, size_t nelems,         \
                             int PE_root) {                                                      \
    return broadcast("shmem_" #N "_broadcast", team, dest, source,                               \
                     bytes_of("shmem_" #N "_broadcast", "nelems", nelems, sizeof(T)), PE_root);  \
  }                                                                                              \
  int pshmem_##N##_collect(shmem_team_t team, T* dest, const T* source, size_t nelems) {         \
    return collect("shmem_" #N "_collect", team, dest, source,                                   \
                   bytes_of("shmem_" #N "_collect", "nelems", nelems, sizeof(T)));               \
  }                                                                                              \
  int pshmem_##N##_fcollect(shmem_team_t team, T* dest, const T* source, size_t nelems) {        \
    return fcollect("shmem_" #N "_fcollect", team, dest, source,                                 \
                    bytes_of("shmem_" #N "_fcollect", "nelems", nelems, sizeof(T)));             \
  }                                                                                              \
  int pshmem_##N##_alltoall(shmem_team_t team, T* dest, const T* source, size_t nelems) {        \
    return alltoall("shmem_" #N "_alltoall", team, dest, source,                                 \
                    bytes_of("shmem_" #N "_alltoall", "nelems", nelems, sizeof(T)));             \
  }                                                                                              \
  int pshmem_##N##_alltoalls(shmem_team_t team, T* dest, const T* source, ptrdiff_t dst,         \
                             ptrdiff_t sst, size_t nelems) {                                     \
    return alltoalls("shmem_" #N "_alltoalls", team, dest, source, dst, sst, nelems, sizeof(T)); \
  }                                                                                              \
  SHMOE_WEAK_ALIAS(shmem_##N##_broadcast)                                                        \
  SHMOE_WEAK_ALIAS(shmem_##N##_collect)                                                          \
  SHMOE_WEAK_ALIAS(shmem_##N##_fcollect)                                                         \
  SHMOE_WEAK_ALIAS(shmem_##N##_alltoall)                                                         \
  SHMOE_WEAK_ALIAS(shmem_##N##_alltoalls)
SHMOE_RMA_TYPES(SHMOE_DEF_TEAM_COLL)

int pshmem_broadcastmem(shmem_team_t team, void* dest, const void* source, size_t nelems,
                        int PE_root) {
  return broadcast("shmem_broadcastmem", team, dest, source, nelems, PE_root);
}
int pshmem_collectmem(shmem_team_t team, void* dest, const void* source, size_t nelems) {
  return collect("shmem_collectmem", team, dest, source, nelems);
}
int pshmem_fcollectmem(shmem_team_t team, void* dest, const void* source, size_t nelems) {
  return fcollect("shmem_fcollectmem", team, dest, source, nelems);
}
int pshmem_alltoallmem(shmem_team_t team, void* dest, const void* source, size_t nelems) {
  return alltoall("shmem_alltoallmem", team, dest, source, nelems);
}
int pshmem_alltoallsmem(shmem_team_t team, void* dest, const void* source, ptrdiff_t dst,
                        ptrdiff_t sst, size_t nelems) {
  return alltoalls("shmem_alltoallsmem", team, dest, source, dst, sst, nelems, 1);
}
SHMOE_WEAK_ALIAS(shmem_broadcastmem)
SHMOE_WEAK_ALIAS(shmem_collectmem)
SHMOE_WEAK_ALIAS(shmem_fcollectmem)
SHMOE_WEAK_ALIAS(shmem_alltoallmem)
SHMOE_WEAK_ALIAS(shmem_alltoallsmem)

#define SHMOE_DEF_REDUCE(T, N, OP, CLASS)                                                       \
  int pshmem_##N##_##OP##_reduce(shmem_team_t team, T* dest, const T* source, size_t nreduce) { \
    return reduce<T, coll::CLASS>("shmem_" #N "_" #OP "_reduce", team, dest, source, nreduce);  \
  }                                                                                             \
  SHMOE_WEAK_ALIAS(shmem_##N##_##OP##_reduce)
#define SHMOE_DEF_REDUCE_BITWISE(T, N) \
  SHMOE_DEF_REDUCE(T, N, and, And)     \
  SHMOE_DEF_REDUCE(T, N, or, Or) SHMOE_DEF_REDUCE(T, N, xor, Xor)
#define SHMOE_DEF_REDUCE_MINMAX(T, N) \
  SHMOE_DEF_REDUCE(T, N, max, Max) SHMOE_DEF_REDUCE(T, N, min, Min)
#define SHMOE_DEF_REDUCE_ARITH(T, N) \
  SHMOE_DEF_REDUCE(T, N, sum, Sum) SHMOE_DEF_REDUCE(T, N, prod, Prod)
SHMOE_REDUCE_BITWISE_TYPES(SHMOE_DEF_REDUCE_BITWISE)
SHMOE_REDUCE_MINMAX_TYPES(SHMOE_DEF_REDUCE_MINMAX)
SHMOE_REDUCE_ARITH_TYPES(SHMOE_DEF_REDUCE_ARITH)

#define SHMOE_DEF_SCAN(T, N, KIND, EXCLUSIVE)                                               \
  int pshmem_##N##_sum_##KIND(shmem_team_t team, T* dest, const T* source, size_t nelems) { \
    return sum_scan<T>("shmem_" #N "_sum_" #KIND, team, dest, source, nelems, EXCLUSIVE);   \
  }                                                                                         \
  SHMOE_WEAK_ALIAS(shmem_##N##_sum_##KIND)
#define SHMOE_DEF_SCANS(T, N) SHMOE_DEF_SCAN(T, N, inscan, false) SHMOE_DEF_SCAN(T, N, exscan, true)
SHMOE_REDUCE_ARITH_TYPES(SHMOE_DEF_SCANS)

// ---- Deprecated active-set forms ------------------------------------------------------------

void pshmem_barrier(int PE_start, int logPE_stride, int PE_size, long* pSync) {
  (void)pSync;
  const auto call = active_set("shmem_barrier", PE_start, logPE_stride, PE_size);
  Team& team = call.team();
  std::lock_guard lock(team.mutex());
  coll::finish(team);  // quiet, then the barrier
}

void pshmem_sync(int PE_start, int logPE_stride, int PE_size, long* pSync) {
  (void)pSync;
  const auto call = active_set("shmem_sync", PE_start, logPE_stride, PE_size);
  Team& team = call.team();
  std::lock_guard lock(team.mutex());
  team.sync();
}
SHMOE_WEAK_ALIAS(shmem_barrier)
SHMOE_WEAK_ALIAS(shmem_sync)

#define SHMOE_DEF_ACTIVE_SET_SIZED(BITS, T)                                                 \
  void pshmem_broadcast##BITS(void* dest, const void* source, size_t nelems, int PE_root,   \
                              int PE_start, int logPE_stride, int PE_size, long* pSync) {   \
    (void)pSync;                                                                            \
    const char* fn = "shmem_broadcast" #BITS;                                               \
    const auto call = active_set(fn, PE_start, logPE_stride, PE_size);                      \
    Team& team = call.team();                                                               \
    if (PE_root < 0 || PE_root >= PE_size) {                                                \
      shmoe::api_error(fn, "PE_root={} is out of range (0..{})", PE_root, PE_size - 1);     \
    }                                                                                       \
    std::lock_guard lock(team.mutex());                                                     \
    check_dest(team, dest, bytes_of(fn, "nelems", nelems, sizeof(T)), fn);                  \
    coll::broadcast(team, dest, source, nelems * sizeof(T), PE_root, false);                \
  }                                                                                         \
  void pshmem_collect##BITS(void* dest, const void* source, size_t nelems, int PE_start,    \
                            int logPE_stride, int PE_size, long* pSync) {                   \
    (void)pSync;                                                                            \
    const char* fn = "shmem_collect" #BITS;                                                 \
    const auto call = active_set(fn, PE_start, logPE_stride, PE_size);                      \
    Team& team = call.team();                                                               \
    std::lock_guard lock(team.mutex());                                                     \
    check_dest(team, dest, bytes_of(fn, "nelems", nelems, sizeof(T)), fn);                  \
    coll::collect(team, dest, source, nelems * sizeof(T));                                  \
  }                                                                                         \
  void pshmem_fcollect##BITS(void* dest, const void* source, size_t nelems, int PE_start,   \
                             int logPE_stride, int PE_size, long* pSync) {                  \
    (void)pSync;                                                                            \
    const char* fn = "shmem_fcollect" #BITS;                                                \
    const auto call = active_set(fn, PE_start, logPE_stride, PE_size);                      \
    Team& team = call.team();                                                               \
    std::lock_guard lock(team.mutex());                                                     \
    check_dest(team, dest, bytes_of(fn, "nelems", nelems, sizeof(T) * PE_size), fn);        \
    coll::fcollect(team, dest, source, nelems * sizeof(T));                                 \
  }                                                                                         \
  void pshmem_alltoall##BITS(void* dest, const void* source, size_t nelems, int PE_start,   \
                             int logPE_stride, int PE_size, long* pSync) {                  \
    (void)pSync;                                                                            \
    const char* fn = "shmem_alltoall" #BITS;                                                \
    const auto call = active_set(fn, PE_start, logPE_stride, PE_size);                      \
    Team& team = call.team();                                                               \
    std::lock_guard lock(team.mutex());                                                     \
    if (nelems == 0) return;                                                                \
    check_dest(team, dest, bytes_of(fn, "nelems", nelems, sizeof(T) * PE_size), fn);        \
    coll::alltoall(team, dest, source, nelems * sizeof(T));                                 \
  }                                                                                         \
  void pshmem_alltoalls##BITS(void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst, \
                              size_t nelems, int PE_start, int logPE_stride, int PE_size,   \
                              long* pSync) {                                                \
    (void)pSync;                                                                            \
    const char* fn = "shmem_alltoalls" #BITS;                                               \
    const auto call = active_set(fn, PE_start, logPE_stride, PE_size);                      \
    Team& team = call.team();                                                               \
    if (nelems == 0) return;                                                                \
    check_strides(dst, sst, fn);                                                            \
    std::lock_guard lock(team.mutex());                                                     \
    check_dest(team, dest, ((PE_size * nelems - 1) * dst + 1) * sizeof(T), fn);             \
    coll::alltoalls(team, dest, source, dst, sst, nelems, sizeof(T));                       \
  }                                                                                         \
  SHMOE_WEAK_ALIAS(shmem_broadcast##BITS)                                                   \
  SHMOE_WEAK_ALIAS(shmem_collect##BITS)                                                     \
  SHMOE_WEAK_ALIAS(shmem_fcollect##BITS)                                                    \
  SHMOE_WEAK_ALIAS(shmem_alltoall##BITS)                                                    \
  SHMOE_WEAK_ALIAS(shmem_alltoalls##BITS)
SHMOE_DEF_ACTIVE_SET_SIZED(32, uint32_t)
SHMOE_DEF_ACTIVE_SET_SIZED(64, uint64_t)

#define SHMOE_DEF_TO_ALL(T, N, OP, CLASS)                                                \
  void pshmem_##N##_##OP##_to_all(T* dest, const T* source, int nreduce, int PE_start,   \
                                  int logPE_stride, int PE_size, T* pWrk, long* pSync) { \
    (void)pWrk;                                                                          \
    (void)pSync;                                                                         \
    const char* fn = "shmem_" #N "_" #OP "_to_all";                                      \
    const auto call = active_set(fn, PE_start, logPE_stride, PE_size);                   \
    Team& team = call.team();                                                            \
    if (nreduce < 0) shmoe::api_error(fn, "nreduce={} is negative", nreduce);            \
    std::lock_guard lock(team.mutex());                                                  \
    check_reduce_dest(team, dest, bytes_of(fn, "nreduce", nreduce, sizeof(T)), fn);      \
    coll::reduce<T, coll::CLASS>(team, dest, source, static_cast<std::size_t>(nreduce)); \
  }                                                                                      \
  SHMOE_WEAK_ALIAS(shmem_##N##_##OP##_to_all)
#define SHMOE_DEF_TO_ALL_BITWISE(T, N) \
  SHMOE_DEF_TO_ALL(T, N, and, And) SHMOE_DEF_TO_ALL(T, N, or, Or) SHMOE_DEF_TO_ALL(T, N, xor, Xor)
#define SHMOE_DEF_TO_ALL_MINMAX(T, N) \
  SHMOE_DEF_TO_ALL(T, N, max, Max) SHMOE_DEF_TO_ALL(T, N, min, Min)
#define SHMOE_DEF_TO_ALL_ARITH(T, N) \
  SHMOE_DEF_TO_ALL(T, N, sum, Sum) SHMOE_DEF_TO_ALL(T, N, prod, Prod)
SHMOE_TO_ALL_BITWISE_TYPES(SHMOE_DEF_TO_ALL_BITWISE)
SHMOE_TO_ALL_MINMAX_TYPES(SHMOE_DEF_TO_ALL_MINMAX)
SHMOE_TO_ALL_ARITH_TYPES(SHMOE_DEF_TO_ALL_ARITH)

}  // extern "C"
