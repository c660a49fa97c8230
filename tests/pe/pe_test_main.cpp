#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "pe_test.hpp"

namespace shmoe::test {

std::uint64_t shared_seed() {
  static std::uint64_t* slot = static_cast<std::uint64_t*>(shmem_malloc(sizeof(std::uint64_t)));
  if (shmem_my_pe() == 0) {
    std::uint64_t seed = std::random_device{}() | (std::uint64_t(std::random_device{}()) << 32);
    for (int pe = 0; pe < shmem_n_pes(); ++pe) shmem_uint64_p(slot, seed, pe);
  }
  shmem_barrier_all();
  std::uint64_t seed = *slot;
  shmem_barrier_all();  // nobody overwrites the slot before everyone read it
  return seed;
}

std::vector<bool> expected_shared_memory_pes() {
  const int me = shmem_my_pe(), n = shmem_n_pes();
  std::string host;
  if (const char* id = std::getenv("SHMOE_HOST_ID")) {
    host = id;
  } else {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    host = name;
  }
  const char* transport = std::getenv("SHMOE_TRANSPORT");
  const bool ucx_only = transport != nullptr && std::string(transport) == "ucx";
  // Every PE publishes a hash of its host name; PE pe shares memory with me if the hashes match.
  auto* hashes = static_cast<std::uint64_t*>(shmem_calloc(n, sizeof(std::uint64_t)));
  const std::uint64_t mine = std::hash<std::string>{}(host) | 1;
  for (int pe = 0; pe < n; ++pe) shmem_uint64_p(hashes + me, mine, pe);
  shmem_barrier_all();
  std::vector<bool> shared(n);
  for (int pe = 0; pe < n; ++pe) shared[pe] = pe == me || (!ucx_only && hashes[pe] == mine);
  shmem_barrier_all();
  shmem_free(hashes);
  return shared;
}

}  // namespace shmoe::test

int main(int argc, char** argv) {
  int provided = 0;
  shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided);
  // Every PE checks; only PE 0 narrates, the others speak up on failure.
  std::vector<char*> args(argv, argv + argc);
  char brief[] = "--gtest_brief=1";
  if (shmem_my_pe() != 0) args.push_back(brief);
  int n_args = static_cast<int>(args.size());
  args.push_back(nullptr);  // argv[argc] is null, and GoogleTest moves it along
  testing::InitGoogleTest(&n_args, args.data());
  int failed = RUN_ALL_TESTS();
  shmem_finalize();
  return failed;
}
