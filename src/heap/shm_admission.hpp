// Admission of symmetric heaps before any segment is created, so that a heap that cannot be
// backed is refused at shmem_init with the numbers that decide it, instead of a SIGBUS at the
// first touch of a page that /dev/shm cannot supply.
//
// Why a check and not a reservation: posix_fallocate() on the segment would make every page of
// every heap real at start-up. Measured on a 2-core, 24 GiB VM (tmpfs /dev/shm), 8 PEs with the
// default 512 MiB heap took 4.8-5.1 s to start instead of 0.01 s, and held 4 GiB of RAM for the
// whole job whatever the program used; the test suite starts hundreds of such jobs, several at
// a time. So heaps stay sparse (pages come at first touch): shmem_init refuses a heap larger
// than the machine's memory, or heaps of this host's PEs that /dev/shm cannot hold now, and a
// page that /dev/shm cannot supply later (other users filled it) is explained by bus_error.hpp.
#pragma once

#include <cstddef>
#include <string>

#include "common/memory_info.hpp"

namespace shmoe::heap {

struct HeapRequest {
  std::string variable;       // SHMEM_SYMMETRIC_SIZE, or SMA_SYMMETRIC_SIZE when that one set it
  std::string text;           // its value as given; empty when unset (the default applies)
  std::size_t requested = 0;  // the heap the program asked for
};

// "SHMEM_SYMMETRIC_SIZE=512M", or "SHMEM_SYMMETRIC_SIZE (unset: 512.0 MiB)".
std::string describe(const HeapRequest& r);

// Throws shmoe::Error naming the variable, the value and the allowed range (1 byte up to this
// machine's memory) when the requested heap is outside it.
void check_heap_size(const HeapRequest& r);

// Throws shmoe::Error naming /dev/shm's free space, the request and `pes_on_host` when that many
// PEs' segments of `segment_bytes` each (heap with the runtime's own state, and the program's
// global data) do not fit in what /dev/shm has free now.
void admit_segments(const HeapRequest& r, std::size_t segment_bytes, int pes_on_host);
// The same against a given space of /dev/shm.
void admit_segments(const HeapRequest& r, std::size_t segment_bytes, int pes_on_host,
                    const FileSystemSpace& shm);

}  // namespace shmoe::heap
