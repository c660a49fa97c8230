#include "bootstrap/launch_env.hpp"

#include <climits>

#include "common/env.hpp"
#include "common/error.hpp"

namespace shmoe::bootstrap {
namespace {

struct RankVars {
  const char* rank;
  const char* size;
  const char* launcher;
};

// First match wins: shmoerun's own variables override whatever launched shmoerun.
constexpr RankVars kLaunchers[] = {
    {"SHMOE_RANK", "SHMOE_SIZE", "shmoerun"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI"},
    {"PMI_RANK", "PMI_SIZE", "PMI"},
    {"SLURM_PROCID", "SLURM_NTASKS", "Slurm"},
};

}  // namespace

LaunchInfo detect_launch() {
  LaunchInfo info;
  const RankVars* found = nullptr;
  for (const auto& vars : kLaunchers) {
    if (env::get(vars.rank)) {
      found = &vars;
      break;
    }
  }
  if (found == nullptr) {
    info.launcher = "singleton";
    info.hosts_store = true;
    info.store = StoreAddress{"127.0.0.1", 0};
    return info;
  }
  info.launcher = found->launcher;
  auto size_text = env::get(found->size);
  if (!size_text) {
    throw make_error("{} is set but {} is not: cannot tell the job size", found->rank, found->size);
  }
  info.size = static_cast<int>(env::parse_int(*size_text, found->size, 1, INT_MAX));
  info.rank =
      static_cast<int>(env::parse_int(*env::get(found->rank), found->rank, 0, info.size - 1));
  auto store = env::get("SHMOE_STORE");
  if (!store) {
    if (info.size == 1) {
      info.hosts_store = true;
      info.store = StoreAddress{"127.0.0.1", 0};
      return info;
    }
    throw make_error(
        "started by {} as PE {} of {}, but SHMOE_STORE is not set: export SHMOE_STORE=HOST:PORT "
        "(a free port on the host of PE 0, which then runs the config store there) for every PE",
        info.launcher, info.rank, info.size);
  }
  info.store = StoreAddress::parse(*store, "SHMOE_STORE");
  // Under shmoerun the launcher runs the store; under other launchers PE 0 does.
  info.hosts_store = info.launcher != "shmoerun" && info.rank == 0;
  return info;
}

}  // namespace shmoe::bootstrap
