// shmoe_init_from and shmoe_init_joining: shmem_init_thread for a job that another framework
// (torch.distributed, a scheduler of one's own) started, which knows each process's rank, the
// job size, where the config store runs (in PE 0, or apart from every PE), and a secret it
// handed to every process itself.
#include <exception>
#include <string>

#include "bootstrap/launch_env.hpp"
#include "common/error.hpp"
#include "shmem/last_error.hpp"
#include "shmem/runtime.hpp"
#include "shmoe/runtime.h"

namespace {

int init_given(const char* name, bool pe0_hosts_store, int rank, int size, const char* store,
               const char* job_key, int requested, int* provided) {
  if (shmoe::runtime_or_null() != nullptr) {
    shmoe::set_last_error(std::string(name) + ": shmoe is initialized already");
    return -1;
  }
  try {
    if (store == nullptr) throw shmoe::make_error("store is NULL");
    if (job_key == nullptr) throw shmoe::make_error("job_key is NULL");
    auto address = shmoe::bootstrap::StoreAddress::parse(store, "store");
    if (address.port == 0 && size > 1) {
      throw shmoe::make_error(
          "store='{}' has port 0: the other PEs must know where PE 0's store listens", store);
    }
    shmoe::bootstrap::give_launch(rank, size, store, job_key, pe0_hosts_store);
  } catch (const std::exception& e) {
    shmoe::set_last_error(std::string(name) + ": " + e.what());
    return -1;
  }
  return shmem_init_thread(requested, provided);
}

}  // namespace

extern "C" {

int shmoe_init_from(int rank, int size, const char* store, const char* job_key, int requested,
                    int* provided) {
  return init_given("shmoe_init_from", true, rank, size, store, job_key, requested, provided);
}

int shmoe_init_joining(int rank, int size, const char* store, const char* job_key, int requested,
                       int* provided) {
  return init_given("shmoe_init_joining", false, rank, size, store, job_key, requested, provided);
}

}  // extern "C"
