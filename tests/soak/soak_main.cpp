// A bounded soak test: for SOAK_SECONDS (default 60), every PE runs the same random sequence of
// RMA puts and gets, atomics, barriers and MoE dispatch/combine, and checks every result against
// an expectation it computes locally. Any mismatch ends the job with the seed, the step and the
// details; SOAK_SEED=<seed> replays a run (the sequence depends only on the seed and PE count,
// not on timing, except for how many steps fit in the time).
#include <fmt/format.h>
#include <shmem.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <random>
#include <string>

#include "common/env.hpp"
#include "soak.hpp"

namespace shmoe::soak {

void Soak::fail(const std::string& op, const std::string& what) const {
  fmt::print(stderr, "soak: FAILED on PE {} of {} at step {} ({}), seed {}: {}\n", me, n, step, op,
             seed, what);
  std::fflush(stderr);
  shmem_global_exit(1);
  std::abort();  // shmem_global_exit does not return; this only satisfies [[noreturn]]
}

namespace {

using Step = void (*)(Soak&);
struct Kind {
  const char* name;
  Step run;
  unsigned weight;  // relative frequency
};
// MoE steps are the slowest (a context per step), so they come less often.
constexpr std::array<Kind, 5> kKinds = {{{"put", step_put, 4},
                                         {"get", step_get, 4},
                                         {"atomics", step_atomics, 3},
                                         {"barriers", step_barriers, 2},
                                         {"moe", step_moe, 2}}};

std::uint64_t agree_on_seed() {
  auto* slot = static_cast<std::uint64_t*>(shmem_calloc(1, sizeof(std::uint64_t)));
  if (shmem_my_pe() == 0) {
    std::uint64_t seed = 0;
    if (auto text = env::get("SOAK_SEED")) {
      seed = static_cast<std::uint64_t>(env::parse_int(*text, "SOAK_SEED", 0, INT64_MAX));
    } else {
      seed = (std::uint64_t(std::random_device{}()) << 32) | std::random_device{}();
    }
    for (int pe = 0; pe < shmem_n_pes(); ++pe) shmem_uint64_p(slot, seed, pe);
  }
  shmem_barrier_all();
  std::uint64_t seed = *slot;
  shmem_barrier_all();
  shmem_free(slot);
  return seed;
}

const Kind& pick(Soak& s) {
  unsigned total = 0;
  for (const auto& k : kKinds) total += k.weight;
  auto r = s.draw(0, total - 1);
  for (const auto& k : kKinds) {
    if (r < k.weight) return k;
    r -= k.weight;
  }
  return kKinds.back();
}

// Only PE 0 looks at the clock; the others learn its decision, so all stop at the same step.
bool keep_going(int* stop_flag, const Soak& s, std::chrono::steady_clock::time_point end) {
  if (s.me == 0) {
    const int stop = std::chrono::steady_clock::now() >= end ? 1 : 0;
    for (int pe = 0; pe < s.n; ++pe) shmem_int_p(stop_flag, stop, pe);
  }
  shmem_barrier_all();
  return *stop_flag == 0;
}

}  // namespace
}  // namespace shmoe::soak

int main() {
  using namespace shmoe::soak;
  shmem_init();
  Soak s;
  s.me = shmem_my_pe();
  s.n = shmem_n_pes();
  s.seed = agree_on_seed();
  s.rng.seed(s.seed);
  const auto seconds_text = shmoe::env::get("SOAK_SECONDS");
  const double seconds = static_cast<double>(
      seconds_text ? shmoe::env::parse_int(*seconds_text, "SOAK_SECONDS", 1, 24 * 3600) : 60);
  if (s.me == 0) {
    fmt::print("soak: {} PEs, {} s, seed {} (replay with SOAK_SEED={})\n", s.n, seconds, s.seed,
               s.seed);
    std::fflush(stdout);
  }
  init_rma_buffers();
  int* stop_flag = static_cast<int*>(shmem_calloc(1, sizeof(int)));
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
  std::array<std::uint64_t, kKinds.size()> counts{};
  while (keep_going(stop_flag, s, end)) {
    ++s.step;
    const Kind& k = pick(s);
    k.run(s);
    ++counts[static_cast<std::size_t>(&k - kKinds.data())];
  }
  if (s.me == 0) {
    std::string summary;
    for (std::size_t i = 0; i < kKinds.size(); ++i)
      summary += fmt::format(" {}={}", kKinds[i].name, counts[i]);
    fmt::print("soak: PASSED {} steps:{} (seed {})\n", s.step, summary, s.seed);
  }
  shmem_free(stop_flag);
  free_rma_buffers();
  shmem_finalize();
  return 0;
}
