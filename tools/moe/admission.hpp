// shmoe-moe's admission of a run, before any PE starts: what it needs on each PE (the symmetric
// heap it asks for, in /dev/shm, and the private buffers the tool and the operators allocate),
// checked against what this machine has; and the files it will write, checked writable. Without
// it, a shape such as --bs 1048576 --hidden 4096 --topk 8 sized an 800 GB heap and filled RAM
// until the OOM killer came, and an unwritable --output-dir or --trace aborted the run at its end.
// (Not in the option parsers: those stay free of side effects, and the PEs parse again.)
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/memory_info.hpp"
#include "mega_options.hpp"
#include "options.hpp"

namespace shmoe::tools {

struct MemoryNeed {
  std::uint64_t heap = 0;     // each PE's SHMEM_SYMMETRIC_SIZE: space in /dev/shm
  std::uint64_t windows = 0;  // of it, the operators' windows (zeroed at creation: all touched)
  std::uint64_t host = 0;     // each PE's private memory: inputs, outputs, golden data, weights
  // The user set the heap: whether /dev/shm holds it is shmem_init's to say, naming the variable.
  bool heap_from_user = false;
};

struct MachineMemory {
  std::optional<std::uint64_t> available;  // MemAvailable
  std::optional<FileSystemSpace> shm;      // /dev/shm
};
MachineMemory this_machine();

// SHMEM_SYMMETRIC_SIZE (else SMA_SYMMETRIC_SIZE) as the user set it; nullopt when unset or not a
// size (shmem_init names the bad value then).
std::optional<std::uint64_t> user_heap_size();

// One PE's need for one dispatch/combine case, and for `shmoe-moe mega`. `heap`: the user's
// SHMEM_SYMMETRIC_SIZE, else what shmoe-moe sets.
MemoryNeed moe_case_need(const MoeRunOptions& o, const MoeCase& c,
                         std::optional<std::uint64_t> heap);
MemoryNeed mega_need(const MegaOptions& o, std::optional<std::uint64_t> heap);

// Empty when `pes` PEs that need `need` each fit in `m`; else what they need against what the
// machine has.
std::string shortfall(const MemoryNeed& need, int pes, const MachineMemory& m);

// Empty when every case fits; else the refusal: the case, the shortfall and the largest --bs
// (--tokens for mega) that fits.
std::string refuse_moe_run(const MoeRunOptions& o, std::optional<std::uint64_t> heap,
                           const MachineMemory& m);
std::string refuse_mega_run(const MegaOptions& o, std::optional<std::uint64_t> heap,
                            const MachineMemory& m);

// Empty when the outputs the options name can be written (--output-dir with --perf, created if
// needed; --trace; --csv); else the refusal naming the option, the path and the reason.
std::string refuse_moe_outputs(const MoeRunOptions& o);
std::string refuse_mega_outputs(const MegaOptions& o);

}  // namespace shmoe::tools
