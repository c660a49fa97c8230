// shmoerun -n N [options] PROGRAM ARGS...: the oshrun of shmoe.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "launcher.hpp"

int main(int argc, char** argv) {
  CLI::App app{"shmoerun: start an OpenSHMEM program as N processing elements on this host"};
  shmoe::tools::LaunchOptions options;
  double timeout_s = 0;
  app.add_option("-n,--np", options.n_pes, "number of PEs")->required()->check(CLI::Range(1, 1024));
  app.add_flag("-p,--prefix,--tag-output", options.prefix_output,
               "prefix every output line with the PE number");
  app.add_option("--timeout", timeout_s, "stop the job after this many seconds (0: never)")
      ->check(CLI::Range(0.0, 1e7));
  app.prefix_command();  // everything from PROGRAM on belongs to the program
  app.footer(
      "Each PE gets SHMOE_RANK, SHMOE_SIZE and SHMOE_STORE (the config store this launcher runs).\n"
      "If a PE fails, the others are stopped within a few seconds and shmoerun exits non-zero.");
  CLI11_PARSE(app, argc, argv);
  options.command = app.remaining();
  if (options.command.empty()) {
    std::fprintf(stderr, "shmoerun: no PROGRAM given\n%s", app.help().c_str());
    return 2;
  }
  options.job_timeout = std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
  try {
    return shmoe::tools::run_job(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shmoerun: %s\n", e.what());
    return 1;
  }
}
