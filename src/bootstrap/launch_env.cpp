#include "bootstrap/launch_env.hpp"

#include <climits>
#include <optional>

#include "bootstrap/pmix_launch.hpp"
#include "bootstrap/reachable_address.hpp"
#include "common/env.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "common/settings.hpp"

namespace shmoe::bootstrap {
namespace {

struct RankVars {
  const char* rank;
  const char* size;
  const char* launcher;
};

constexpr RankVars kShmoerun = {"SHMOE_RANK", "SHMOE_SIZE", "shmoerun"};
// Read, in this order, when no PMIx server started the process (or PMIx_Init failed).
constexpr RankVars kOtherLaunchers[] = {
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI"},
    {"PMI_RANK", "PMI_SIZE", "PMI"},
    {"SLURM_PROCID", "SLURM_NTASKS", "Slurm"},
};

// shmoerun's variables are shmoe settings; the other launchers' are their own.
std::optional<std::string> rank_variable(const char* name) {
  return std::string_view(name).starts_with("SHMOE_") ? settings::text_of(name) : env::get(name);
}

constexpr const char* kLoopback = "127.0.0.1";
constexpr const char* kJoining = "shmoe_init_joining";
constexpr const char* kEveryInterface = "0.0.0.0";
constexpr std::string_view kRendezvousKey = "shmoe.rendezvous";

std::string pmix_launcher_name() {
  if (env::get("OMPI_COMM_WORLD_RANK")) return "Open MPI (PMIx)";
  if (env::get("SLURM_PROCID")) return "Slurm (PMIx)";
  return "PMIx";
}

// Where the launcher has no channel for a secret, every PE must be given the same key; a job of
// one PE, which no other process joins, makes one up.
JobKey key_from_user(const LaunchInfo& info) {
  if (auto key = JobKey::from_environment()) return *key;
  if (info.size == 1) return JobKey::generate();
  if (info.launcher == kShmoerun.launcher) {
    throw make_error(
        "SHMOE_RANK is set but {} is not: shmoerun gives its PEs both; a PE started by hand "
        "with shmoerun's variables needs the key of the job it joins",
        kJobKeyVariable);
  }
  throw make_error(
      "started by {} as PE {} of {} with SHMOE_STORE, but {} is not set: the config store "
      "admits only processes that prove the job's key, and {} has no channel to hand one out. "
      "Give every PE of the job the same fresh key, e.g. "
      "`{}=$({}) mpirun -x {} -x SHMOE_STORE=... PROGRAM` or "
      "`export {}=$({})` before `srun` (a start through PMIx, mpirun or srun --mpi=pmix, "
      "needs none)",
      info.launcher, info.rank, info.size, kJobKeyVariable, info.launcher, kJobKeyVariable,
      kMakeKeyCommand, kJobKeyVariable, kJobKeyVariable, kMakeKeyCommand);
}

// Rank and size from the variables `vars` names; the store is at SHMOE_STORE, hosted by PE 0.
LaunchInfo from_variables(const RankVars& vars, const std::optional<std::string>& store,
                          const std::string& pmix_failure) {
  LaunchInfo info;
  info.launcher = vars.launcher;
  auto size_text = rank_variable(vars.size);
  if (!size_text) {
    throw make_error("{} is set but {} is not: cannot tell the job size", vars.rank, vars.size);
  }
  info.size = static_cast<int>(env::parse_int(*size_text, vars.size, 1, INT_MAX));
  info.rank =
      static_cast<int>(env::parse_int(*rank_variable(vars.rank), vars.rank, 0, info.size - 1));
  if (!store) {
    if (info.size == 1) {
      info.hosts_store = true;
      info.store = StoreAddress{kLoopback, 0};
      info.job_key = key_from_user(info);
      return info;
    }
    throw make_error(
        "started by {} as PE {} of {}, but SHMOE_STORE is not set{}: export "
        "SHMOE_STORE=HOST:PORT (a free port on the host of PE 0, which then runs the config store "
        "there) for every PE",
        info.launcher, info.rank, info.size,
        pmix_failure.empty() ? "" : fmt::format(" and PMIx failed ({})", pmix_failure));
  }
  info.store = StoreAddress::parse(*store, "SHMOE_STORE");
  // Under shmoerun the launcher runs the store; under other launchers PE 0 does.
  info.hosts_store = info.launcher != kShmoerun.launcher && info.rank == 0;
  info.job_key = key_from_user(info);
  return info;
}

// Rank and size from the PMIx server. SHMOE_STORE, when given, still says where PE 0 runs the
// store; otherwise PE 0 picks a free port and tells the others in rendezvous().
LaunchInfo from_pmix(std::shared_ptr<PmixClient> pmix, const std::optional<std::string>& store) {
  LaunchInfo info;
  info.launcher = pmix_launcher_name();
  info.rank = pmix->rank();
  info.size = pmix->size();
  info.hosts_store = info.rank == 0;
  if (store) {
    info.store = StoreAddress::parse(*store, "SHMOE_STORE");
  } else {
    info.store_from_pe0 = true;
    // Loopback when no PE runs elsewhere: nothing outside this host can reach the store then.
    info.store = StoreAddress{pmix->local_size() == info.size ? kLoopback : kEveryInterface, 0};
  }
  info.pmix = std::move(pmix);
  // PE 0 hands its key out in rendezvous(), after its store, which needs the key, listens.
  if (info.rank == 0) {
    auto given = JobKey::from_environment();
    info.job_key = given ? *given : JobKey::generate();
  }
  return info;
}

// What give_launch() set, for the next detect_launch() alone.
std::optional<LaunchInfo>& given_launch() {
  static std::optional<LaunchInfo> given;
  return given;
}

}  // namespace

std::string store_loss_reason(const LaunchInfo& launch) {
  if (launch.launcher == kShmoerun.launcher) {
    return "the shmoerun that runs the store has ended or died";
  }
  if (launch.hosts_store) return "this PE's own store has stopped";
  if (launch.launcher == kJoining) return "the store, which runs apart from the PEs, has ended";
  return "PE 0, which hosts the store, has died or cannot be reached";
}

void give_launch(int rank, int size, std::string_view store, std::string_view job_key,
                 bool pe0_hosts_store) {
  if (size < 1) throw make_error("size={} must be at least 1", size);
  if (rank < 0 || rank >= size) throw make_error("rank={} is out of range (0..{})", rank, size - 1);
  LaunchInfo info;
  info.launcher = pe0_hosts_store ? "shmoe_init_from" : kJoining;
  info.rank = rank;
  info.size = size;
  info.store = StoreAddress::parse(store, "store");
  info.hosts_store = pe0_hosts_store && rank == 0;
  info.job_key = JobKey::parse(job_key, "job_key");
  given_launch() = std::move(info);
}

LaunchInfo detect_launch() {
  if (auto& given = given_launch()) {
    LaunchInfo info = std::move(*given);
    given.reset();
    return info;
  }
  const auto store = settings::store();
  // shmoerun's own variables override whatever launched shmoerun, a PMIx server included.
  if (settings::rank()) return from_variables(kShmoerun, store, "");
  std::string pmix_failure;
  if (PmixClient::started_by_server()) {
    try {
      return from_pmix(PmixClient::for_this_process(), store);
    } catch (const Error& e) {
      pmix_failure = e.what();
    }
  }
  for (const auto& vars : kOtherLaunchers) {
    if (rank_variable(vars.rank)) {
      if (!pmix_failure.empty()) {
        log::warn("a PMIx server started this process, but {}: reading {} and SHMOE_STORE instead",
                  pmix_failure, vars.rank);
      }
      return from_variables(vars, store, pmix_failure);
    }
  }
  if (!pmix_failure.empty()) {
    throw make_error("a PMIx server started this process, but {}", pmix_failure);
  }
  LaunchInfo info;
  info.launcher = "singleton";
  info.hosts_store = true;
  info.store = StoreAddress{kLoopback, 0};
  info.job_key = key_from_user(info);
  return info;
}

void rendezvous(LaunchInfo& launch, std::uint16_t hosted_port, std::chrono::milliseconds timeout) {
  if (launch.hosts_store) launch.store.port = hosted_port;
  if (!launch.pmix) return;
  std::string mine;
  if (launch.rank == 0) {
    if (launch.store_from_pe0 && launch.store.host == kEveryInterface) {
      launch.store.host = address_for_other_hosts();
    }
    mine = launch.job_key.text() + "\n" + (launch.store_from_pe0 ? launch.store.str() : "");
  }
  std::string from_pe0;
  try {
    // A job that calls shmem_init again after shmem_finalize meets again under a fresh key,
    // so that no PE can read the address of the store that went away with the first round.
    static int round = 0;
    from_pe0 = launch.pmix->broadcast_from_rank0(fmt::format("{}.{}", kRendezvousKey, round++),
                                                 mine, timeout);
  } catch (const Error& e) {
    throw make_error("start-up exchange with PE 0 through PMIx failed: {}", e.what());
  }
  const auto newline = from_pe0.find('\n');
  if (newline == std::string::npos) {
    throw make_error("PE 0 published a malformed start-up record through PMIx: '{}'", from_pe0);
  }
  // The key comes through the launcher's own channels (its daemons and their local sockets to
  // this job's processes), never through the config store it protects.
  launch.job_key = JobKey::parse(from_pe0.substr(0, newline), "the job key PE 0 published");
  if (launch.store_from_pe0) {
    launch.store =
        StoreAddress::parse(from_pe0.substr(newline + 1), "the store address PE 0 published");
  }
}

}  // namespace shmoe::bootstrap
