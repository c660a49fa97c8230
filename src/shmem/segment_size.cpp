#include "shmem/segment_size.hpp"

#include <limits>

#include "shmem/barrier.hpp"
#include "shmem/team.hpp"

namespace shmoe {

std::size_t heap_segment_bytes(std::size_t requested) {
  constexpr std::size_t kPageSize = 4096;
  constexpr std::size_t kRuntimeState =
      DisseminationBarrier::kFlagBytes + TeamRegistry::kReservedBytes;
  constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
  if (requested > kMax - kRuntimeState - kPageSize) return kMax;
  return (requested + kRuntimeState + kPageSize - 1) / kPageSize * kPageSize;
}

}  // namespace shmoe
