// The size of a PE's symmetric heap segment: what shmem_init maps, and what shmoe-config
// --diagnose plans /dev/shm for.
#pragma once

#include <cstddef>

namespace shmoe {

// The heap the program asked for, plus the runtime's own symmetric state (barrier flags, team
// scratch), in whole pages; SIZE_MAX when that does not fit in a size_t.
std::size_t heap_segment_bytes(std::size_t requested);

}  // namespace shmoe
