#include "options.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "foreign_options.hpp"

namespace shmoe::tools {
namespace {

// The launcher's own words of argv and the program's: the command starts at the first word that is
// neither an option nor an option's value, or after `--`. Spellings scripts written for Open
// MPI's mpirun and oshrun use are read as ours (`-np N`, `-np=N`, `-n=N`: CLI11 would read -np
// as -n with the value "p"); an option shmoerun lacks is refused by name before any PE starts.
struct SplitArgs {
  std::vector<std::string> own;  // in the reverse order CLI11's parse() consumes them
  std::vector<std::string> command;
  std::string refusal;  // why an option was refused, or empty
};

std::string np_spelled_long(const std::string& arg) {
  if (arg == "-np") return "--np";
  for (const char* short_form : {"-np=", "-n="}) {
    if (arg.rfind(short_form, 0) == 0) return "--np=" + arg.substr(std::strlen(short_form));
  }
  return arg;
}

// The option `arg` names (a short one may carry its value: -n4), or nullptr.
const CLI::Option* option_named(const CLI::App& app, const std::string& arg) {
  const std::string name = arg.substr(0, arg.find('='));
  if (const CLI::Option* o = app.get_option_no_throw(name)) return o;
  if (arg.size() > 2 && arg[1] != '-') return app.get_option_no_throw(arg.substr(0, 2));
  return nullptr;
}

SplitArgs split_args(const CLI::App& app, int argc, char** argv) {
  SplitArgs out;
  std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
  std::size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string arg = np_spelled_long(args[i]);
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg.front() != '-') break;
    const CLI::Option* option = option_named(app, arg);
    if (option == nullptr) {
      const std::string name = arg.substr(0, arg.find('='));
      const auto advice = advice_for_foreign_option(name);
      out.refusal = advice ? fmt::format("{} is not a shmoerun option: {}", name, *advice)
                           : fmt::format(
                                 "unknown option {} (shmoerun's options come before "
                                 "PROGRAM; shmoerun --help lists them)",
                                 name);
      return out;
    }
    out.own.push_back(arg);
    // An option spelled alone takes the next word as its value (flags take none; `--np=4` and
    // `-n4` carry theirs).
    const bool carries_value =
        arg.find('=') != std::string::npos || app.get_option_no_throw(arg) == nullptr;
    if (option->get_expected_min() > 0 && !carries_value && i + 1 < args.size()) {
      out.own.push_back(args[++i]);
    }
  }
  out.command.assign(args.begin() + static_cast<std::ptrdiff_t>(std::min(i, args.size())),
                     args.end());
  std::reverse(out.own.begin(), out.own.end());
  return out;
}

// What shmoerun --help says after the options.
constexpr const char* kFooter =
    "PROGRAM without a '/' is looked up in PATH, then in the working directory. Options of\n"
    "mpirun that shmoerun lacks (--oversubscribe, -x, --map-by...) are refused, saying what\n"
    "to do instead. PE output comes out in whole lines; an error several PEs report in the\n"
    "same words is printed once, with how many more PEs reported it.\n"
    "Each PE gets SHMOE_RANK, SHMOE_SIZE, SHMOE_STORE (the config store this launcher runs)\n"
    "and SHMOE_JOB_KEY (the job's secret, new for every job, which the store asks every\n"
    "process to prove), and torchrun's RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,\n"
    "MASTER_ADDR and MASTER_PORT (the last two where this shmoerun starts the whole job). "
    "Launchers that share one store (--store, --size, --store-only) need\n"
    "the same SHMOE_JOB_KEY in their environment (e.g. from `openssl rand -hex 16`).\n"
    "If a PE fails, the others are stopped within a few seconds and shmoerun exits non-zero.\n"
    "With SHMOE_PE_LOSS=continue a PE that fails is lost and the others go on; where the lost\n"
    "PEs all died (killed, crashed) and every other PE ended with status 0, shmoerun exits 0,\n"
    "its last line 'done without K of N PEs (SHMOE_PE_LOSS=continue): ...; lost: PE ...'.\n"
    "SIGUSR1 to shmoerun makes every PE write its hang report, and shmoerun prints which PE\n"
    "the others wait on.\n"
    "Two hosts, 2 PEs each, SHMOE_JOB_KEY exported to both:\n"
    "  hostA$ shmoerun -n 2 --size 4 --bind 0.0.0.0 --port 29500 ./prog\n"
    "  hostB$ shmoerun -n 2 --size 4 --first-rank 2 --store hostA:29500 ./prog";

// The values CLI11 reads that LaunchOptions holds in other units.
struct RawValues {
  double timeout_s = 0;
  double start_timeout_s = 0;
  int port = 0;
};

void add_options(CLI::App& app, ShmoerunOptions& out, RawValues& raw) {
  app.add_option("-n,--np", out.launch.n_pes,
                 "number of PEs started here (with --store-only: of the whole job); -np N, -np=N "
                 "and -n=N work too")
      ->required()
      ->check(CLI::Range(1, 1024));
  app.add_option("--size", out.launch.job_size,
                 "PEs of the whole job, when other hosts start the rest (default: -n)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--first-rank", out.launch.first_rank, "rank of the first PE started here")
      ->check(CLI::Range(0, 1023));
  app.add_option("--store", out.launch.store_address,
                 "HOST:PORT of the job's config store, run by another shmoerun; default: run it "
                 "here");
  app.add_option("--port", raw.port, "port the config store run here listens on (default: any)")
      ->check(CLI::Range(1, 65535));
  app.add_option("--bind", out.launch.store_bind,
                 "address the config store run here listens on (default 127.0.0.1; 0.0.0.0 for "
                 "a job that spans hosts)");
  app.add_flag("--store-only", out.store_only,
               "run only the config store of a job of -n PEs, started elsewhere with --store");
  app.add_option("--start-timeout", raw.start_timeout_s,
                 "with --store-only: stop the store when not every PE has come within this many "
                 "seconds (0: wait for ever)")
      ->check(CLI::Range(0.0, 1e7));
  app.add_flag("-p,--prefix,--tag-output", out.launch.prefix_output,
               "prefix every output line with the PE number");
  app.add_option("--timeout", raw.timeout_s, "stop the job after this many seconds (0: never)")
      ->check(CLI::Range(0.0, 1e7));
  app.prefix_command();  // the usage line shows PROGRAM's place; split_args finds where it starts
  app.footer(kFooter);
}

// Parses the launcher's own words: -1, or the exit status after saying what is wrong.
int parse_own(CLI::App& app, std::vector<std::string> own) {
  try {
    app.parse(own);
  } catch (const CLI::RequiredError& e) {
    if (app.get_option("--np")->count() > 0) return app.exit(e);
    std::fprintf(stderr,
                 "shmoerun: -n N (or -np N) is required: how many PEs to start (1..1024)\n");
    return 2;
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return -1;
}

// PROGRAM found once here, as mpirun finds it (PATH, then the working directory), rather than
// failed once per PE: -1, or 127 after saying why not.
int find_command(LaunchOptions& options) {
  std::string why;
  const auto program = find_program(options.command.front(), why);
  if (!program) {
    std::fprintf(stderr, "shmoerun: cannot run PROGRAM %s: %s\n", options.command.front().c_str(),
                 why.c_str());
    return 127;
  }
  options.command.front() = *program;
  return -1;
}

// Checks what the options say together and fills what is left of LaunchOptions: -1, or the exit
// status after saying what is wrong.
int finish_options(const CLI::App& app, const RawValues& raw, std::vector<std::string> command,
                   ShmoerunOptions& out) {
  LaunchOptions& options = out.launch;
  options.store_port = static_cast<std::uint16_t>(raw.port);
  options.job_timeout = std::chrono::milliseconds(static_cast<long long>(raw.timeout_s * 1000));
  options.command = std::move(command);
  out.start_timeout = std::chrono::milliseconds(static_cast<long long>(raw.start_timeout_s * 1000));
  if (out.start_timeout.count() > 0 && !out.store_only) {
    std::fprintf(stderr,
                 "shmoerun: --start-timeout is for --store-only, which waits for PEs "
                 "started elsewhere\n");
    return 2;
  }
  if (out.store_only) {
    if (!options.store_address.empty() || !options.command.empty()) {
      std::fprintf(stderr,
                   "shmoerun: --store-only runs no PEs: it takes no --store and no PROGRAM\n");
      return 2;
    }
    return -1;
  }
  if (!options.store_address.empty() && (raw.port != 0 || options.store_bind != "127.0.0.1")) {
    std::fprintf(stderr,
                 "shmoerun: --port and --bind are for a store run here, not with --store\n");
    return 2;
  }
  if (options.command.empty()) {
    std::fprintf(stderr, "shmoerun: no PROGRAM given\n%s", app.help().c_str());
    return 2;
  }
  return find_command(options);
}

}  // namespace

int parse_shmoerun_options(int argc, char** argv, ShmoerunOptions& out) {
  CLI::App app{"shmoerun: start an OpenSHMEM program as N processing elements on this host"};
  RawValues raw;
  add_options(app, out, raw);
  if (argc > 0) app.name(argv[0]);  // what parse(argc, argv) would do; the usage line shows it
  SplitArgs split = split_args(app, argc, argv);
  if (!split.refusal.empty()) {
    std::fprintf(stderr, "shmoerun: %s\n", split.refusal.c_str());
    return 2;
  }
  if (const int status = parse_own(app, std::move(split.own)); status != -1) return status;
  return finish_options(app, raw, std::move(split.command), out);
}

}  // namespace shmoe::tools
