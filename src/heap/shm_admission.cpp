#include "heap/shm_admission.hpp"

#include "common/bytes.hpp"
#include "common/error.hpp"
#include "common/memory_info.hpp"

namespace shmoe::heap {

std::string describe(const HeapRequest& r) {
  return r.text.empty() ? fmt::format("{} (unset: {})", r.variable, human_bytes(r.requested))
                        : fmt::format("{}={}", r.variable, r.text);
}

void check_heap_size(const HeapRequest& r) {
  const std::uint64_t memory = physical_memory_bytes();
  if (r.requested >= 1 && (memory == 0 || r.requested <= memory)) return;
  throw make_error(
      "{} ({} bytes) is out of range: a PE's symmetric heap must be 1 byte to {} ({} bytes, this "
      "machine's memory)",
      describe(r), r.requested, human_bytes(memory), memory);
}

void admit_segments(const HeapRequest& r, std::size_t segment_bytes, int pes_on_host) {
  // Without /dev/shm, creating the segment says what is wrong.
  if (const auto space = file_system_space(kShmDir))
    admit_segments(r, segment_bytes, pes_on_host, *space);
}

void admit_segments(const HeapRequest& r, std::size_t segment_bytes, int pes_on_host,
                    const FileSystemSpace& shm) {
  if (pes_on_host < 1) return;
  const std::uint64_t pes = static_cast<std::uint64_t>(pes_on_host);
  const std::uint64_t need = saturating_mul(segment_bytes, pes);
  if (need <= shm.free) return;
  const std::string who =
      pes == 1 ? std::string("this PE's symmetric heap needs")
               : fmt::format("the symmetric heaps of the {} PEs on this host need", pes);
  const std::uint64_t overhead =
      segment_bytes - std::min<std::uint64_t>(segment_bytes, r.requested);
  const std::uint64_t fits = shm.free / pes;
  const std::string lower =
      fits > overhead + kMiB
          ? fmt::format("lower {} to at most {}M, ", r.variable, (fits - overhead) / kMiB)
          : std::string();
  const std::string each = pes == 1 ? human_bytes(segment_bytes)
                                    : fmt::format("{} x {}", pes, human_bytes(segment_bytes));
  throw make_error(
      "{} {} in {} ({}: {} plus the runtime's own state and the program's global data), but "
      "{} has only {} free (of {}): {}run fewer PEs on this host, or enlarge {} (mount -o "
      "remount,size=... {}; in Docker, --shm-size)",
      who, human_bytes(need), kShmDir, each, describe(r), kShmDir, human_bytes(shm.free),
      human_bytes(shm.total), lower, kShmDir, kShmDir);
}

}  // namespace shmoe::heap
