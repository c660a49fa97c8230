#include <gtest/gtest.h>

#include <random>
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
