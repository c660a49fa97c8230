// Prints what the bootstrap layer tells this process about its launch, as one line:
//   rank=R size=N launcher=L hosts_store=0|1 store=HOST:PORT job_key=K
// The rendezvous runs as in shmem_init, except that PE 0 runs no store: it announces the port of
// SHMOE_STORE, or 4242. The checks are about who learns what, not about the store.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>

#include "bootstrap/launch_env.hpp"
#include "bootstrap/pmix_launch.hpp"

int main() {
  try {
    auto launch = shmoe::bootstrap::detect_launch();
    const std::uint16_t port = launch.store.port != 0 ? launch.store.port : 4242;
    shmoe::bootstrap::rendezvous(launch, port, std::chrono::seconds(30));
    std::printf("rank=%d size=%d launcher=%s hosts_store=%d store=%s job_key=%s\n", launch.rank,
                launch.size, launch.launcher.c_str(), launch.hosts_store ? 1 : 0,
                launch.store.str().c_str(), launch.job_key.text().c_str());
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  return 0;
}
