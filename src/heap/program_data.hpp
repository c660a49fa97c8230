// The program's global and static variables as symmetric data objects (OpenSHMEM 1.5, 3.3).
//
// Design: at the start of shmem_init, before the library starts any thread, the pages that hold
// the executable's writable data (.data, .bss and whatever else its writable PT_LOAD segments
// cover outside RELRO) are moved into a POSIX shared-memory object mapped at the same virtual
// addresses, contents kept. Peers on the host then map that object like the heap, so a put into
// a peer's global is a plain store and an AMO a CPU atomic, exactly as for the heap. The object
// also appears in this PE's own window right after the heap (see ShmTransport), so a symmetric
// offset past the heap names a byte of the data segment on every PE, whatever address ASLR gave
// the executable there, and UCX registers heap and data as one region.
//
// Only the executable's data is symmetric, as in other implementations: globals of shared
// libraries are refused by the address checks, naming the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "heap/segment.hpp"

namespace shmoe::heap {

// A page-aligned address range; empty when there is nothing to move.
struct DataRange {
  std::byte* base = nullptr;
  std::size_t size = 0;
  bool contains(const void* addr, std::size_t bytes) const {
    auto a = reinterpret_cast<std::uintptr_t>(addr);
    auto b = reinterpret_cast<std::uintptr_t>(base);
    return size > 0 && a >= b && a - b < size && bytes <= size - (a - b);
  }
};

// The executable's writable, non-RELRO pages, found from its program headers and checked against
// /proc/self/maps (one contiguous read-write run). Empty, with `why` set, when there is none or
// its layout is not one this code can move safely.
DataRange find_program_data(std::string* why);

// Moves `range` into a new shared-memory segment named `name`, keeping every byte: the pages at
// `range` become a shared mapping of it, and the returned Segment is a second mapping of the same
// object (where the transport wants it, see Segment::move_to). Must run while no other thread of
// the process can write to the range: a write made between the copy and the remap would be lost.
Segment move_into_shared_memory(const DataRange& range, const std::string& name);

// The name of where, outside the executable, `addr` lives ("libfoo.so.1"), or "" if unknown: for
// the message that refuses a global of a shared library.
std::string object_file_of(const void* addr);

}  // namespace shmoe::heap
