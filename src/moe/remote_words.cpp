#include "moe/remote_words.hpp"

#include <shmem.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>

#include "common/backoff.hpp"
#include "common/pe_loss.hpp"
#include "shmem/detached_get.hpp"

namespace shmoe::moe {

std::vector<std::optional<std::uint64_t>> read_remote_words(const LiveSet& live,
                                                            std::uint64_t* word,
                                                            const std::vector<bool>& want,
                                                            const std::string& what) {
  using State = transport::DetachedGet::State;
  using Clock = std::chrono::steady_clock;
  std::vector<std::optional<std::uint64_t>> out(want.size());
  std::vector<std::unique_ptr<transport::DetachedGet>> gets(want.size());
  const shmoe::LostPesHandledHere lost_pes_unanswered;  // a lost PE's get fails: nullopt
  for (std::size_t pe = 0; pe < want.size(); ++pe) {
    if (!want[pe]) continue;
    if (auto* mapped = static_cast<std::uint64_t*>(shmem_ptr(word, static_cast<int>(pe)))) {
      out[pe] = std::atomic_ref<std::uint64_t>(*mapped).load(std::memory_order_acquire);
    } else {
      gets[pe] = shmoe::getmem_detached(word, sizeof(std::uint64_t), static_cast<int>(pe));
    }
  }
  auto in_flight = [](const auto& g) { return g != nullptr && g->state() == State::kInFlight; };
  const auto deadline = Clock::now() + live.bound() / 4;
  shmoe::wait_until(
      [&] {
        live.beat();  // held here, not stopped
        return std::none_of(gets.begin(), gets.end(), in_flight) || Clock::now() >= deadline;
      },
      [&] { return shmoe::WaitState{what, what + " of PEs on other hosts", -1, 0, 0, 0}; });
  for (std::size_t pe = 0; pe < want.size(); ++pe) {
    if (gets[pe] == nullptr || gets[pe]->state() != State::kDone) continue;
    std::uint64_t v = 0;
    std::memcpy(&v, gets[pe]->data(), sizeof v);
    out[pe] = v;
  }
  return out;
}

}  // namespace shmoe::moe
