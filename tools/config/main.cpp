// shmoe-config: what a build needs to compile and link against this shmoe (--cflags, --libs,
// --prefix, --version), --env, the settings in force, and --diagnose, a health check of the
// installation and the host.
#include <fmt/format.h>
#include <unistd.h>

#include <thread>

#include "diagnose.hpp"
#include "layout.hpp"
#include "options.hpp"
#include "settings_listing.hpp"

namespace {

using shmoe::tools::config::Layout;
using shmoe::tools::config::LayoutKind;
using shmoe::tools::config::Request;

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
  if (q.env) {
    const auto listing = shmoe::tools::config::list_settings();
    fmt::print("{}", listing.text);
    return listing.valid ? 0 : 1;
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
  if (int stop = shmoe::tools::config::parse_config_options(argc, argv, SHMOE_VERSION_STRING, q);
      stop >= 0) {
    return stop;
  }
  try {
    return run(q);
  } catch (const std::exception& e) {
    fmt::print(stderr, "shmoe-config: {}\n", e.what());
    return 2;
  }
}
