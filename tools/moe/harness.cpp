#include "harness.hpp"

#include <fmt/format.h>
#include <shmem.h>

#include <random>

#include "shmoe/moe.hpp"

namespace shmoe::tools {

std::uint64_t agree_on_seed(std::uint64_t requested) {
  auto* slot = static_cast<std::uint64_t*>(shmem_calloc(1, sizeof(std::uint64_t)));
  if (shmem_my_pe() == 0) {
    std::uint64_t seed = requested;
    if (seed == 0) seed = (std::uint64_t(std::random_device{}()) << 32) | std::random_device{}();
    for (int pe = 0; pe < shmem_n_pes(); ++pe) shmem_uint64_p(slot, seed, pe);
  }
  shmem_barrier_all();
  std::uint64_t seed = *slot;
  shmem_free(slot);
  return seed;
}

int run_driver(std::uint64_t requested_seed,
               const std::function<std::string(std::uint64_t)>& banner, std::size_t n_cases,
               const std::function<int(std::size_t, std::uint64_t)>& run_case) {
  const std::uint64_t seed = agree_on_seed(requested_seed);
  if (shmem_my_pe() == 0) fmt::print("{}\n", banner(seed));
  int status = 0;
  for (std::size_t i = 0; i < n_cases; ++i) {
    try {
      status |= run_case(i, seed);
    } catch (const Error& e) {
      if (e.status() != SHMOE_MOE_REFUSED) throw;
      fmt::print(stderr, "PE {}: refused: {}\n", shmem_my_pe(), e.what());
      status = 2;
    }
  }
  return status;
}

}  // namespace shmoe::tools
