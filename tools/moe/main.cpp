// shmoe-moe: starts its own PEs (no launcher step), each of which generates inputs, runs the MoE
// operators, verifies every output and, with --perf, writes CSVs. `shmoe-moe mega ...` does the
// same for the fused MegaMoE layer.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sched.h>
#include <shmem.h>
#include <unistd.h>

#include <cstdlib>
#include <new>
#include <string>

#include "admission.hpp"
#include "command_line.hpp"
#include "common/settings.hpp"
#include "launcher.hpp"
#include "mega_run.hpp"
#include "plot.hpp"
#include "run.hpp"

namespace {

// In a PE (started by this same program): initialise SHMEM, run, finalise. A PE that cannot go
// on (a file it cannot write, memory it cannot get) says why and ends the whole job: the other
// PEs may be waiting for it in a collective call.
template <typename Run>
int run_as_pe(Run&& run) {
  int provided = 0;
  shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided);
  int status = 0;
  try {
    status = run();
  } catch (const std::bad_alloc&) {
    fmt::print(stderr,
               "PE {}: out of memory: this shape needs more memory than the machine could give "
               "(lower --bs/--tokens, the dimensions or --pes)\n",
               shmem_my_pe());
    std::fflush(stderr);
    shmem_global_exit(1);
  } catch (const std::exception& e) {
    fmt::print(stderr, "PE {}: error: {}\n", shmem_my_pe(), e.what());
    std::fflush(stderr);
    shmem_global_exit(1);
  }
  shmem_finalize();
  return status;
}

// --fail-pe P[,Q...]:kill:IT: a PE killed in the middle of the traffic must not end the job, so the
// PEs run with SHMOE_PE_LOSS=continue (the launcher and the store read it too); one the user set to
// abort is refused rather than overridden. An error text, or empty.
std::string allow_pe_loss(bool mega, const shmoe::tools::MoeRunOptions& o) {
  if (mega || o.fail_pes.empty() || o.fail_action != shmoe::tools::FailAction::kKill) return "";
  const auto set = shmoe::settings::text_of("SHMOE_PE_LOSS");
  if (set && *set != "continue") {
    return fmt::format(
        "--fail-pe {}:kill:{} needs SHMOE_PE_LOSS=continue (a killed PE would end the job), but "
        "SHMOE_PE_LOSS={} is set: unset it or set it to continue",
        fmt::join(o.fail_pes, ","), o.fail_iteration, *set);
  }
  shmoe::settings::set("SHMOE_PE_LOSS", "continue");
  return "";
}

// With --perf: a note when the PEs outnumber the cores this process may run on, since the
// timings then include waiting for a core. Empty otherwise.
std::string shared_cores_note(int pes, bool perf) {
  cpu_set_t set;
  if (!perf || ::sched_getaffinity(0, sizeof set, &set) != 0) return "";
  const int cores = CPU_COUNT(&set);
  if (pes <= cores) return "";
  return fmt::format(
      "shmoe-moe: note: {} PEs on {} core{}: the PEs share cores, so the timings include waiting "
      "for one; use at most {} PEs for timings a core per PE would give",
      pes, cores, cores == 1 ? "" : "s", cores);
}

int run(int argc, char** argv) {
  shmoe::tools::MoeCommandLine command_line;
  if (int stop = shmoe::tools::parse_command_line(argc, argv, command_line); stop >= 0) {
    return stop;
  }
  const bool mega = command_line.mega;
  const shmoe::tools::MoeRunOptions& options = command_line.moe;
  const shmoe::tools::MegaOptions& mega_options = command_line.mega_options;

  if (shmoe::settings::moe_pe()) {
    return mega ? run_as_pe([&] { return shmoe::tools::run_mega_pe(mega_options); })
                : run_as_pe([&] { return shmoe::tools::run_moe_pe(options); });
  }

  // Before any PE starts: outputs that cannot be written, and a run this machine cannot hold
  // (with what would fit), are refused.
  std::string refusal = mega ? refuse_mega_outputs(mega_options) : refuse_moe_outputs(options);
  if (refusal.empty()) {
    const auto user_heap = shmoe::tools::user_heap_size();
    const auto machine = shmoe::tools::this_machine();
    refusal = mega ? refuse_mega_run(mega_options, user_heap, machine)
                   : refuse_moe_run(options, user_heap, machine);
  }
  if (!refusal.empty()) {
    fmt::print(stderr, "shmoe-moe{}: {}\n", mega ? " mega" : "", refusal);
    return 2;
  }

  if (const std::string e = allow_pe_loss(mega, options); !e.empty()) {
    fmt::print(stderr, "shmoe-moe: {}\n", e);
    return 2;
  }
  shmoe::tools::LaunchOptions launch;
  launch.name = "shmoe-moe";
  launch.n_pes = mega ? mega_options.pes : options.pes;
  if (const std::string note =
          shared_cores_note(launch.n_pes, mega ? mega_options.perf : options.perf);
      !note.empty()) {
    fmt::print(stderr, "{}\n", note);
  }
  const double timeout_s = mega ? mega_options.routing.timeout_s : options.timeout_s;
  launch.job_timeout = std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  launch.command.push_back(n > 0 ? std::string(self, static_cast<std::size_t>(n)) : argv[0]);
  for (int i = 1; i < argc; ++i) launch.command.push_back(argv[i]);
  shmoe::settings::set("SHMOE_MOE_PE", "1");
  if (!shmoe::settings::text_of("SHMEM_SYMMETRIC_SIZE") &&
      !shmoe::settings::text_of("SMA_SYMMETRIC_SIZE")) {
    shmoe::settings::set("SHMEM_SYMMETRIC_SIZE",
                         std::to_string(mega ? shmoe::tools::mega_symmetric_bytes(mega_options)
                                             : shmoe::tools::symmetric_bytes_needed(options)));
  }
  const int status = shmoe::tools::run_job(launch);
  return !mega && options.plot ? shmoe::tools::plot_perf_csvs(options, status) : status;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "shmoe-moe: out of memory\n");
  } catch (const std::exception& e) {
    fmt::print(stderr, "shmoe-moe: {}\n", e.what());
  }
  return 1;
}
