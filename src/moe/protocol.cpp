#include "moe/protocol.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <shmem.h>

#include <atomic>

#include "common/backoff.hpp"

namespace shmoe::moe {

void FlagArray::raise(int pe, int src, std::uint64_t generation) const {
  shmem_uint64_atomic_set(slot(src), generation, pe);
}

void FlagArray::wait(int src, std::uint64_t generation, const std::string& what) const {
  std::atomic_ref<std::uint64_t> flag(*slot(src));
  shmoe::wait_until([&] { return flag.load(std::memory_order_acquire) >= generation; },
                    [&] {
                      const std::uint64_t seen = flag.load();
                      return shmoe::WaitState{
                          what,
                          fmt::format("{} #{}: waiting for PE {} (its flag is at generation {})",
                                      what, generation, src, seen),
                          src,
                          generation,
                          seen,
                          generation};
                    });
}

std::string first_call_error(const char* op, const std::vector<const CallHeader*>& headers,
                             int my_pe, int n_experts, int max_bs) {
  const CallHeader& mine = *headers[my_pe];
  for (std::size_t pe = 0; pe < headers.size(); ++pe) {
    const CallHeader& h = *headers[pe];
    if (h.hidden != mine.hidden || h.topk != mine.topk || h.experts_per_pe != mine.experts_per_pe ||
        h.dtype != mine.dtype) {
      // Which parameters differ comes first: that is what the caller has to fix.
      std::vector<const char*> differ;
      if (h.hidden != mine.hidden) differ.push_back("hidden");
      if (h.topk != mine.topk) differ.push_back("topk");
      if (h.experts_per_pe != mine.experts_per_pe) differ.push_back("experts_per_pe");
      if (h.dtype != mine.dtype) differ.push_back("dtype");
      return fmt::format(
          "{}: PEs disagree on the parameters ({}): PE {} called with hidden={} topk={} "
          "experts_per_pe={} dtype={}, PE {} with hidden={} topk={} experts_per_pe={} dtype={}",
          op, fmt::join(differ, ", "), pe, h.hidden, h.topk, h.experts_per_pe, h.dtype, my_pe,
          mine.hidden, mine.topk, mine.experts_per_pe, mine.dtype);
    }
  }
  for (std::size_t pe = 0; pe < headers.size(); ++pe) {
    const CallHeader& h = *headers[pe];
    const auto* i = h.error_index;
    switch (h.error) {
      case kNoError:
        break;
      case kExpertOutOfRange:
        return fmt::format(
            "{}: PE {}: expert_ids[{}][{}]={} is out of range (0..{}, or -1 for "
            "no expert)",
            op, pe, i[0], i[1], i[2], n_experts - 1);
      case kBsTooLarge:
        return fmt::format("{}: PE {}: bs={} is out of range (0..{}, the context's max_bs)", op, pe,
                           i[0], max_bs);
      case kBadPointer:
        return fmt::format("{}: PE {}: required tensor '{}' is null", op, pe,
                           i[0] == 0   ? "x"
                           : i[0] == 1 ? "expert_ids"
                                       : "outputs");
      default:
        return fmt::format("{}: PE {} reported error code {}", op, pe, h.error);
    }
  }
  return {};
}

}  // namespace shmoe::moe
