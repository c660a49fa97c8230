// shmoe-config: what a build needs to compile and link against this shmoe (--cflags, --libs,
// --prefix, --version), and --diagnose, a health check of the installation and the host.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <thread>

#include "diagnose.hpp"
#include "layout.hpp"

namespace {

using shmoe::tools::config::Layout;
using shmoe::tools::config::LayoutKind;

struct Request {
  bool prefix = false, cflags = false, libs = false, diagnose = false;
  int pes = 0;
};

int default_pes() {
  long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  return cpus > 0 ? static_cast<int>(cpus) : 1;
}

// A build tree has no install prefix; printing its path instead would send
// `$(shmoe-config --prefix)/lib` to a directory that does not hold the library.
int print_prefix(const Layout& layout) {
  if (layout.kind == LayoutKind::kBuildTree) {
    fmt::print(stderr,
               "shmoe-config: this copy runs from the build tree {}, which is not an "
               "installation; run `cmake --install {} --prefix DIR` and use DIR/bin/shmoe-config "
               "(--cflags and --libs do work here, for the build tree)\n",
               layout.root.string(), layout.root.string());
    return 1;
  }
  fmt::print("{}\n", layout.root.string());
  return 0;
}

int run(const Request& q) {
  const Layout layout = shmoe::tools::config::locate(shmoe::tools::config::self_exe());
  if (q.diagnose) {
    auto d = shmoe::tools::config::diagnose(layout, {q.pes});
    fmt::print("{}\n", d.report.dump(2));
    return d.healthy ? 0 : 1;
  }
  int status = 0;
  if (q.prefix) status = print_prefix(layout);
  if (q.cflags) fmt::print("{}\n", shmoe::tools::config::cflags(layout));
  if (q.libs) fmt::print("{}\n", shmoe::tools::config::libs(layout));
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  Request q;
  q.pes = default_pes();
  CLI::App app{"shmoe-config: compiler and linker flags for shmoe, and a health check"};
  app.set_version_flag("--version", SHMOE_VERSION_STRING);
  app.add_flag("--prefix", q.prefix, "the install root (<prefix>/bin holds this program)");
  app.add_flag("--cflags", q.cflags, "compiler flags: -I<prefix>/include");
  app.add_flag("--libs", q.libs, "linker flags: -L<prefix>/lib -lshmoe and an rpath");
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
  if (!(q.prefix || q.cflags || q.libs || q.diagnose)) {
    std::cerr << app.help();
    return 2;
  }
  try {
    return run(q);
  } catch (const std::exception& e) {
    fmt::print(stderr, "shmoe-config: {}\n", e.what());
    return 2;
  }
}
