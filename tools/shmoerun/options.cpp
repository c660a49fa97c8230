#include "options.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>

namespace shmoe::tools {

int parse_shmoerun_options(int argc, char** argv, LaunchOptions& options) {
  CLI::App app{"shmoerun: start an OpenSHMEM program as N processing elements on this host"};
  double timeout_s = 0;
  app.add_option("-n,--np", options.n_pes, "number of PEs")->required()->check(CLI::Range(1, 1024));
  app.add_flag("-p,--prefix,--tag-output", options.prefix_output,
               "prefix every output line with the PE number");
  app.add_option("--timeout", timeout_s, "stop the job after this many seconds (0: never)")
      ->check(CLI::Range(0.0, 1e7));
  app.prefix_command();  // everything from PROGRAM on belongs to the program
  app.footer(
      "Each PE gets SHMOE_RANK, SHMOE_SIZE and SHMOE_STORE (the config store this launcher runs).\n"
      "If a PE fails, the others are stopped within a few seconds and shmoerun exits non-zero.\n"
      "SIGUSR1 to shmoerun makes every PE write its hang report, and shmoerun prints which PE\n"
      "the others wait on.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  options.command = app.remaining();
  if (options.command.empty()) {
    std::fprintf(stderr, "shmoerun: no PROGRAM given\n%s", app.help().c_str());
    return 2;
  }
  options.job_timeout = std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
  return -1;
}

}  // namespace shmoe::tools
