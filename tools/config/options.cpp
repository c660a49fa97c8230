#include "options.hpp"

#include <CLI/CLI.hpp>
#include <iostream>

namespace shmoe::tools::config {

int parse_config_options(int argc, char** argv, const char* version, Request& q) {
  CLI::App app{"shmoe-config: compiler and linker flags for shmoe, and a health check"};
  app.set_version_flag("--version", version);
  app.add_flag("--prefix", q.prefix, "the install root (<prefix>/bin holds this program)");
  app.add_flag("--cflags", q.cflags, "compiler flags: -I<prefix>/include");
  app.add_flag("--libs", q.libs, "linker flags: -L<prefix>/lib -lshmoe and an rpath");
  app.add_flag("--env", q.env,
               "every environment variable shmoe reads, with the value in force here, the "
               "default and the meaning; exits 1 when a value set is invalid");
  app.add_flag("--diagnose", q.diagnose,
               "check the installation, loader path, /dev/shm, open-file limit and UCX; prints "
               "JSON, exits 1 when a problem was found, with what to do in next_steps");
  app.add_option("--pes", q.pes, "job size --diagnose plans for (default: the CPU count)")
      ->check(CLI::Range(1, 1 << 16));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (!(q.prefix || q.cflags || q.libs || q.env || q.diagnose)) {
    std::cerr << app.help();
    return 2;
  }
  return -1;
}

}  // namespace shmoe::tools::config
