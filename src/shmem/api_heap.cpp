// Memory management routines (OpenSHMEM 1.5 section 9.3). Every call is collective: PEs call in
// the same order with the same arguments, so the deterministic allocator hands out the same
// offset everywhere; a barrier ends each call so no PE uses memory a peer has not yet allocated.
// A call that performs no action (a zero size, freeing NULL) returns at once, without a barrier,
// as the specification says.
#include <unistd.h>

#include <cstring>

#include "shmem/profiling.hpp"
#include "shmem/runtime.hpp"

namespace {

using shmoe::Runtime;

// SHMOE_DEBUG=1: every PE publishes its arguments and compares them with every other PE's, since
// an asymmetric allocation otherwise corrupts data silently much later.
void check_symmetric_call(Runtime& rt, const char* fn, std::size_t size, std::size_t alignment) {
  static std::uint64_t call_number = 0;
  ++call_number;
  std::string mine = fmt::format("{} size={} alignment={}", fn, size, alignment);
  auto all = rt.store_collectives().allgather("alloc-check", mine, rt.config().init_timeout);
  for (int pe = 0; pe < rt.size(); ++pe) {
    if (all[pe] != all[0]) {
      shmoe::log::fatal(fmt::format(
          "asymmetric allocation (heap call #{}): PE {} called {} but PE 0 called {}; every PE "
          "must make the same heap calls in the same order",
          call_number, pe, all[pe], all[0]));
    }
  }
}

// The largest power of two by which every PE's heap address is congruent: alignments up to it
// can be honoured on every PE with one symmetric offset. Heaps are mapped at page boundaries,
// but where within a larger alignment a PE's heap starts is up to its mmap, so it takes the
// addresses of all PEs, gathered once (collective: the first large shmem_align on every PE).
std::size_t common_heap_alignment(Runtime& rt) {
  static const Runtime* known_for = nullptr;
  static std::size_t known = 0;
  if (known_for == &rt) return known;
  const auto base = reinterpret_cast<std::uintptr_t>(rt.heap_base());
  auto all = rt.store_collectives().allgather("heap-addresses", std::to_string(base),
                                              rt.config().init_timeout);
  std::uintptr_t differences = 0;
  for (const auto& other : all) differences |= std::stoull(other) - base;
  known = differences == 0 ? std::size_t{1} << 62 : differences & (~differences + 1);
  known_for = &rt;
  return known;
}

bool alignment_possible(Runtime& rt, const char* fn, std::size_t alignment) {
  static const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  if (alignment <= page) return true;
  const std::size_t common = common_heap_alignment(rt);
  if (alignment <= common) return true;
  shmoe::log::error(
      "{}: alignment {} cannot be honoured: the PEs' symmetric heaps are mapped at addresses "
      "that agree only modulo {}, so no symmetric offset is {}-aligned on every PE",
      fn, alignment, common, alignment);
  return false;
}

void* allocate(const char* fn, std::size_t size, std::size_t alignment) {
  if (size == 0) return nullptr;  // no action, and so no barrier
  auto& rt = shmoe::runtime(fn);
  std::optional<std::size_t> offset;
  {
    std::lock_guard lock(rt.heap_mutex());
    if (rt.config().debug_allocations) check_symmetric_call(rt, fn, size, alignment);
    if (alignment_possible(rt, fn, alignment)) {
      offset = rt.allocator().allocate(size, alignment,
                                       reinterpret_cast<std::uintptr_t>(rt.heap_base()));
      if (!offset) {
        shmoe::log::error(
            "{}: cannot allocate {} bytes (alignment {}): {} bytes free in the symmetric heap, "
            "largest free block {} bytes; raise SHMEM_SYMMETRIC_SIZE (now {} bytes)",
            fn, size, alignment, rt.allocator().free_bytes(), rt.allocator().largest_free_block(),
            rt.heap_size());
      }
    }
  }
  rt.barrier_all();
  return offset ? rt.heap_base() + *offset : nullptr;
}

std::size_t offset_of_allocation(Runtime& rt, void* ptr, const char* fn) {
  std::size_t offset = shmoe::symmetric_offset(rt, ptr, 1, fn, "ptr");
  if (!rt.allocator().allocation_size(offset)) {
    shmoe::api_error(fn, "ptr={} was not returned by a shmem allocation routine (or was freed)",
                     ptr);
  }
  return offset;
}

// The size of the allocation that starts at ptr, or nullopt where none does (freed, or never
// returned by an allocation routine).
std::optional<std::size_t> live_block_size(Runtime& rt, void* ptr) {
  if (!rt.is_symmetric(ptr, 1)) return std::nullopt;
  std::lock_guard lock(rt.heap_mutex());
  return rt.allocator().allocation_size(rt.offset_of(ptr));
}

}  // namespace

extern "C" {

void* pshmem_malloc(size_t size) {
  return allocate("shmem_malloc", size, 16);
}

void* pshmem_malloc_with_hints(size_t size, long hints) {
  // Hints only promise how memory will be used; on shared memory every use is equally fast.
  (void)hints;
  return allocate("shmem_malloc_with_hints", size, 16);
}

void* pshmem_calloc(size_t count, size_t size) {
  if (size != 0 && count > SIZE_MAX / size) {
    // Every PE passes the same arguments, so every PE returns NULL here: no barrier is owed.
    shmoe::runtime("shmem_calloc");
    shmoe::log::warn("shmem_calloc: count={} times size={} overflows size_t: returning NULL", count,
                     size);
    return nullptr;
  }
  void* p = allocate("shmem_calloc", count * size, 16);
  if (p != nullptr) {
    std::memset(p, 0, count * size);
    shmoe::runtime("shmem_calloc").barrier_all();
  }
  return p;
}

void* pshmem_align(size_t alignment, size_t size) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    // NULL, as Open MPI's SHMEM returns and tests-mellanox's basic.shmalloc expects, with the
    // reason; still a barrier where an allocation would have one, so that a PE that alone passed
    // a bad alignment does not leave the others waiting.
    auto& rt = shmoe::runtime("shmem_align");
    shmoe::log::error("shmem_align: alignment={} is not a power of two: returning NULL", alignment);
    if (size != 0) rt.barrier_all();
    return nullptr;
  }
  return allocate("shmem_align", size, alignment);
}

void pshmem_free(void* ptr) {
  if (ptr == nullptr) return;  // no action, and so no barrier
  auto& rt = shmoe::runtime("shmem_free");
  rt.barrier_all();  // no PE may still be writing into memory that goes away
  {
    std::lock_guard lock(rt.heap_mutex());
    if (rt.config().debug_allocations) check_symmetric_call(rt, "shmem_free", 0, 0);
    rt.allocator().release(offset_of_allocation(rt, ptr, "shmem_free"));
  }
  rt.barrier_all();
}

void* pshmem_realloc(void* ptr, size_t size) {
  if (ptr == nullptr) return allocate("shmem_realloc", size, 16);
  auto& rt = shmoe::runtime("shmem_realloc");
  const std::optional<std::size_t> old_size = live_block_size(rt, ptr);
  if (!old_size) {
    // NULL with the reason, as shmem_align does for a bad alignment (the public suites expect
    // it); the barrier an allocation would have, so that peers that passed a live block go on.
    shmoe::log::error(
        "shmem_realloc: ptr={} is not a live block of the symmetric heap (freed already, or not "
        "returned by shmem_malloc, shmem_calloc, shmem_align or shmem_realloc): returning NULL",
        ptr);
    if (size != 0) rt.barrier_all();
    return nullptr;
  }
  if (size == 0) {
    pshmem_free(ptr);
    return nullptr;
  }
  if (size <= *old_size) {
    rt.barrier_all();
    return ptr;
  }
  void* fresh = allocate("shmem_realloc", size, 16);
  if (fresh == nullptr) return nullptr;  // the old block stays valid, as with realloc(3)
  std::memcpy(fresh, ptr, *old_size);
  pshmem_free(ptr);
  return fresh;
}

SHMOE_WEAK_ALIAS(shmem_malloc)
SHMOE_WEAK_ALIAS(shmem_malloc_with_hints)
SHMOE_WEAK_ALIAS(shmem_calloc)
SHMOE_WEAK_ALIAS(shmem_align)
SHMOE_WEAK_ALIAS(shmem_free)
SHMOE_WEAK_ALIAS(shmem_realloc)

}  // extern "C"
