#include "plot.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "run_csv.hpp"

extern char** environ;

namespace shmoe::tools {
namespace {

namespace fs = std::filesystem;

constexpr int kPlotFailed = 3;

// plot_csv.py: beside this program in the build tree, else in the data directory of the
// installation this program is in (SHMOE_PLOT_SCRIPT_FROM_BIN, e.g. ../share/shmoe, which the pip
// wheel keeps too: bin/ and share/ under the environment's root). Empty when neither has it.
std::string plot_script(std::vector<std::string>& looked_in) {
  const fs::path bin = program_dir();
  if (bin.empty()) return "";
  for (const fs::path& dir : {bin, (bin / SHMOE_PLOT_SCRIPT_FROM_BIN).lexically_normal()}) {
    std::error_code ec;
    if (fs::is_regular_file(dir / "plot_csv.py", ec)) return (dir / "plot_csv.py").string();
    looked_in.push_back(dir.string());
  }
  return "";
}

}  // namespace

int plot_perf_csvs(const MoeRunOptions& o, int job_status) {
  if (job_status != 0) {
    fmt::print(stderr, "shmoe-moe: --plot: the run did not pass (status {}): no PNG drawn\n",
               job_status);
    return job_status;
  }
  std::vector<std::string> looked_in;
  const std::string script = plot_script(looked_in);
  if (script.empty()) {
    fmt::print(stderr, "shmoe-moe: --plot: plot_csv.py is in none of {}: reinstall shmoe\n",
               fmt::join(looked_in, ", "));
    return kPlotFailed;
  }
  // plot_csv.py MAIN WAITS [MAIN WAITS ...], for the CSVs of every case.
  std::vector<std::string> args{o.plot_python, script};
  const std::string name = perf_name(o);
  for (const MoeCase& c : o.cases) {
    std::error_code ec;
    const std::string main = perf_csv_path(o, c, name, o.pes);
    if (!fs::is_regular_file(main, ec)) continue;
    const std::string waits = perf_csv_path(o, c, name + "_waits", o.pes);
    args.push_back(main);
    args.push_back(fs::is_regular_file(waits, ec) ? waits : "-");
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = 0;
  if (const int e = ::posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ); e != 0) {
    fmt::print(stderr, "shmoe-moe: --plot: cannot run {} (--plot-python): {}\n", o.plot_python,
               std::strerror(e));
    return kPlotFailed;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
  // plot_csv.py says what went wrong itself (matplotlib missing: one line).
  if (WIFSIGNALED(status)) {
    fmt::print(stderr, "shmoe-moe: --plot: {} was killed by signal {}\n", o.plot_python,
               WTERMSIG(status));
  }
  return kPlotFailed;
}

}  // namespace shmoe::tools
