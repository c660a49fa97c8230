// Memory management routines (OpenSHMEM 1.5 section 9.3). Every call is collective: PEs call in
// the same order with the same arguments, so the deterministic allocator hands out the same
// offset everywhere; a barrier ends each call so no PE uses memory a peer has not yet allocated.
#include <cstring>

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

void* allocate(const char* fn, std::size_t size, std::size_t alignment) {
  auto& rt = shmoe::runtime(fn);
  std::optional<std::size_t> offset;
  {
    std::lock_guard lock(rt.heap_mutex());
    if (rt.config().debug_allocations) check_symmetric_call(rt, fn, size, alignment);
    if (size > 0) {
      offset = rt.allocator().allocate(size, alignment);
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

}  // namespace

extern "C" {

void* shmem_malloc(size_t size) {
  return allocate("shmem_malloc", size, 16);
}

void* shmem_malloc_with_hints(size_t size, long hints) {
  // Hints only promise how memory will be used; on shared memory every use is equally fast.
  (void)hints;
  return allocate("shmem_malloc_with_hints", size, 16);
}

void* shmem_calloc(size_t count, size_t size) {
  if (size != 0 && count > SIZE_MAX / size) {
    shmoe::api_error("shmem_calloc", "count={} times size={} overflows size_t", count, size);
  }
  void* p = allocate("shmem_calloc", count * size, 16);
  if (p != nullptr) {
    std::memset(p, 0, count * size);
    shmoe::runtime("shmem_calloc").barrier_all();
  }
  return p;
}

void* shmem_align(size_t alignment, size_t size) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    shmoe::api_error("shmem_align", "alignment={} is not a power of two", alignment);
  }
  return allocate("shmem_align", size, alignment);
}

void shmem_free(void* ptr) {
  auto& rt = shmoe::runtime("shmem_free");
  rt.barrier_all();  // no PE may still be writing into memory that goes away
  if (ptr != nullptr) {
    std::lock_guard lock(rt.heap_mutex());
    if (rt.config().debug_allocations) check_symmetric_call(rt, "shmem_free", 0, 0);
    rt.allocator().release(offset_of_allocation(rt, ptr, "shmem_free"));
  }
  rt.barrier_all();
}

void* shmem_realloc(void* ptr, size_t size) {
  if (ptr == nullptr) return allocate("shmem_realloc", size, 16);
  if (size == 0) {
    shmem_free(ptr);
    return nullptr;
  }
  auto& rt = shmoe::runtime("shmem_realloc");
  std::size_t old_size =
      *rt.allocator().allocation_size(offset_of_allocation(rt, ptr, "shmem_realloc"));
  if (size <= old_size) {
    rt.barrier_all();
    return ptr;
  }
  void* fresh = allocate("shmem_realloc", size, 16);
  if (fresh == nullptr) return nullptr;  // the old block stays valid, as with realloc(3)
  std::memcpy(fresh, ptr, old_size);
  shmem_free(ptr);
  return fresh;
}

}  // extern "C"
