#include "options.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace shmoe::tools {
namespace {

// Scripts written for Open MPI's mpirun and oshrun give the PE count as `-np N`, which CLI11
// would read as -n with the value "p". So `-np` becomes `--np` among the launcher's own options;
// from PROGRAM on (the first word that is neither an option nor an option's value) nothing is
// touched. Returns the arguments in the reverse order CLI11's parse() consumes them.
std::vector<std::string> args_with_np_spelled_long(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string& arg = args[i];
    if (arg == "-np") arg = "--np";
    if (arg.size() < 2 || arg.front() != '-' || arg == "--") break;
    // An option spelled alone takes the next word as its value (flags take none; `--np=4` and
    // `-n4` carry theirs, and match no option name).
    const CLI::Option* option = app.get_option_no_throw(arg);
    if (option != nullptr && option->get_expected_min() > 0) ++i;
  }
  std::reverse(args.begin(), args.end());
  return args;
}

}  // namespace

int parse_shmoerun_options(int argc, char** argv, ShmoerunOptions& out) {
  LaunchOptions& options = out.launch;
  CLI::App app{"shmoerun: start an OpenSHMEM program as N processing elements on this host"};
  double timeout_s = 0;
  int port = 0;
  app.add_option("-n,--np", options.n_pes,
                 "number of PEs started here (with --store-only: of the whole job); -np N works "
                 "too")
      ->required()
      ->check(CLI::Range(1, 1024));
  app.add_option("--size", options.job_size,
                 "PEs of the whole job, when other hosts start the rest (default: -n)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--first-rank", options.first_rank, "rank of the first PE started here")
      ->check(CLI::Range(0, 1023));
  app.add_option("--store", options.store_address,
                 "HOST:PORT of the job's config store, run by another shmoerun; default: run it "
                 "here");
  app.add_option("--port", port, "port the config store run here listens on (default: any)")
      ->check(CLI::Range(1, 65535));
  app.add_option("--bind", options.store_bind,
                 "address the config store run here listens on (default 127.0.0.1; 0.0.0.0 for "
                 "a job that spans hosts)");
  app.add_flag("--store-only", out.store_only,
               "run only the config store of a job of -n PEs, started elsewhere with --store");
  app.add_flag("-p,--prefix,--tag-output", options.prefix_output,
               "prefix every output line with the PE number");
  app.add_option("--timeout", timeout_s, "stop the job after this many seconds (0: never)")
      ->check(CLI::Range(0.0, 1e7));
  app.prefix_command();  // everything from PROGRAM on belongs to the program
  app.footer(
      "Each PE gets SHMOE_RANK, SHMOE_SIZE, SHMOE_STORE (the config store this launcher runs)\n"
      "and SHMOE_JOB_KEY (the job's secret, new for every job, which the store asks every\n"
      "process to prove). Launchers that share one store (--store, --size, --store-only) need\n"
      "the same SHMOE_JOB_KEY in their environment (e.g. from `openssl rand -hex 16`).\n"
      "If a PE fails, the others are stopped within a few seconds and shmoerun exits non-zero.\n"
      "SIGUSR1 to shmoerun makes every PE write its hang report, and shmoerun prints which PE\n"
      "the others wait on.\n"
      "Two hosts, 2 PEs each, SHMOE_JOB_KEY exported to both:\n"
      "  hostA$ shmoerun -n 2 --size 4 --bind 0.0.0.0 --port 29500 ./prog\n"
      "  hostB$ shmoerun -n 2 --size 4 --first-rank 2 --store hostA:29500 ./prog");
  if (argc > 0) app.name(argv[0]);  // what parse(argc, argv) would do; the usage line shows it
  try {
    app.parse(args_with_np_spelled_long(app, argc, argv));
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  options.store_port = static_cast<std::uint16_t>(port);
  options.job_timeout = std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
  options.command = app.remaining();
  if (out.store_only) {
    if (!options.store_address.empty() || !options.command.empty()) {
      std::fprintf(stderr,
                   "shmoerun: --store-only runs no PEs: it takes no --store and no PROGRAM\n");
      return 2;
    }
    return -1;
  }
  if (!options.store_address.empty() && (port != 0 || options.store_bind != "127.0.0.1")) {
    std::fprintf(stderr,
                 "shmoerun: --port and --bind are for a store run here, not with --store\n");
    return 2;
  }
  if (options.command.empty()) {
    std::fprintf(stderr, "shmoerun: no PROGRAM given\n%s", app.help().c_str());
    return 2;
  }
  return -1;
}

}  // namespace shmoe::tools
