#include "foreign_options.hpp"

#include <unistd.h>

#include <filesystem>
#include <utility>

#include "common/env.hpp"

namespace shmoe::tools {
namespace {

struct Foreign {
  std::string_view names[4];
  std::string_view advice;
};

constexpr Foreign kForeign[] = {
    {{"--oversubscribe", "-oversubscribe"},
     "not needed: shmoerun starts every PE on this host whatever its core count (PEs beyond "
     "the cores share them)"},
    {{"-x"},
     "not needed: every PE inherits shmoerun's environment; set the variable before shmoerun, "
     "e.g. `VAR=value shmoerun -n 2 ./prog`"},
    {{"--map-by", "-map-by", "--bind-to", "-bind-to"},
     "shmoerun starts every PE on this host and binds none to a core (the kernel places them); "
     "bind inside the program if it needs to"},
    {{"--rank-by", "-rank-by", "--cpu-set", "--cpus-per-rank"},
     "shmoerun numbers the PEs it starts in order and binds none to a core"},
    {{"-H", "--host", "--hostfile", "-hostfile"},
     "shmoerun starts PEs on this host only: for several hosts run one shmoerun per host with "
     "--size, --first-rank and --store (see --help)"},
    {{"--machinefile", "-machinefile", "--npernode", "-npernode"},
     "shmoerun starts PEs on this host only: for several hosts run one shmoerun per host with "
     "--size, --first-rank and --store (see --help)"},
    {{"--allow-run-as-root", "-allow-run-as-root"}, "not needed: shmoerun runs as any user"},
    {{"--mca", "-mca", "--gmca"},
     "Open MPI's MCA parameters do not apply to shmoe: its settings are SHMOE_* environment "
     "variables (`shmoe-config --env` lists them)"},
};

bool is_executable_file(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

}  // namespace

std::optional<std::string> advice_for_foreign_option(std::string_view name) {
  for (const Foreign& f : kForeign) {
    for (std::string_view n : f.names) {
      if (!n.empty() && n == name) return std::string(f.advice);
    }
  }
  return std::nullopt;
}

std::optional<std::string> find_program(const std::string& program, std::string& why) {
  if (program.find('/') != std::string::npos) {  // a path: execvp takes it as it is
    if (is_executable_file(program)) return program;
    why = std::filesystem::exists(program) ? "it is not an executable file" : "it does not exist";
    return std::nullopt;
  }
  const std::string path = env::get("PATH").value_or("");
  for (std::size_t start = 0; start <= path.size();) {
    std::size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    const std::string dir = path.substr(start, end - start);
    if (!dir.empty() && is_executable_file(std::filesystem::path(dir) / program)) return program;
    start = end + 1;
  }
  if (is_executable_file(program)) return "./" + program;
  why = std::filesystem::exists(program) ? "./" + program + " is not an executable file"
                                         : "not found in PATH nor in the working directory " +
                                               std::filesystem::current_path().string();
  return std::nullopt;
}

}  // namespace shmoe::tools
