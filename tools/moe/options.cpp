#include "options.hpp"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <map>
#include <tuple>

#include "cli_checks.hpp"

namespace shmoe::tools {
namespace {

// Single-dash spellings that MoE benchmark scripts pass (-pes, -bs, -h...), mapped to ours.
const std::map<std::string, std::string> kReferenceSpellings = {
    {"-pes", "--pes"},
    {"-bs", "--bs"},
    {"-h", "--hidden"},
    {"-topk", "--topk"},
    {"-expertPerPe", "--experts-per-pe"},
    {"-type", "--dtype"},
    {"-warmup", "--warmup"},
    {"-loops", "--loops"},
    {"-perf", "--perf"},
};

// What the operators' own rules say of one case of the sweep (the public API's check, which
// needs no PE), in this command line's names.
std::string case_error(const MoeRunOptions& o, const MoeCase& c) {
  static const std::map<std::string, std::string, std::less<>> kOptionOf = {
      {"num_experts_per_pe", "--experts-per-pe"},
      {"max_tokens_per_pe", "--bs"},
      {"hidden", "--hidden"},
      {"num_topk", "--topk"},
      {"matrix_workers", "--matrix-workers"},
      {"vector_workers", "--vector-workers"},
      {"shrink_timeout_ms", "--shrink-ms"},
      {"max_recv_rows", "--max-recv-rows"},
  };
  const std::string e = MoeBuffer::config_error(moe_config(o, c), o.pes);
  return e.empty() ? e : in_option_names(e, kOptionOf);
}

}  // namespace

std::string program_dir() {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "";
  return std::filesystem::path(std::string(self, static_cast<std::size_t>(n)))
      .parent_path()
      .string();
}

std::string default_plot_python() {
#ifdef SHMOE_PLOT_PYTHON
  if (::access(SHMOE_PLOT_PYTHON, X_OK) == 0) return SHMOE_PLOT_PYTHON;
#endif
  const std::string dir = program_dir();
  const std::string beside = dir + "/python3";
  if (!dir.empty() && ::access(beside.c_str(), X_OK) == 0) return beside;
  return "python3";
}

MoeConfig moe_config(const MoeRunOptions& o, const MoeCase& c) {
  MoeConfig cfg;
  cfg.num_experts_per_pe = c.experts_per_pe;
  cfg.max_tokens_per_pe = c.bs;
  cfg.hidden = c.hidden;
  cfg.num_topk = c.topk;
  cfg.dtype = c.dtype;
  cfg.max_recv_rows = o.max_recv_rows;
  cfg.matrix_workers = o.matrix_workers;
  cfg.vector_workers = o.vector_workers;
  // 0 is the API's "default" (2 MiB); the tool's --threshold 0 means every segment larger than
  // the average, which a threshold of 1 byte says alike (an empty segment is never above it).
  cfg.double_plane_threshold = o.threshold == 0 ? 1 : o.threshold;
  cfg.shrink_timeout_ms = o.shrink_ms;
  return cfg;
}

std::string op_name(MoeOp op) {
  switch (op) {
    case MoeOp::kDispatch:
      return "dispatch";
    case MoeOp::kCombine:
      return "combine";
    case MoeOp::kDispatchDoublePlane:
      return "dispatch-doubleplane";
    case MoeOp::kCombineDoublePlane:
      return "combine-doubleplane";
    case MoeOp::kPipeline:
      return "pipeline";
  }
  return "?";
}

bool op_is_combine(MoeOp op) {
  return op == MoeOp::kCombine || op == MoeOp::kCombineDoublePlane;
}

bool op_uses_double_plane(const MoeRunOptions& o) {
  return o.op == MoeOp::kDispatchDoublePlane || o.op == MoeOp::kCombineDoublePlane ||
         (o.op == MoeOp::kPipeline && o.double_plane);
}

std::vector<std::string> reversed_args(int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = argc - 1; i >= 1; --i) {
    auto it = kReferenceSpellings.find(argv[i]);
    args.push_back(it != kReferenceSpellings.end() ? it->second : argv[i]);
  }
  return args;
}

void add_moe_options(CLI::App& app, MoeOptionText& text, MoeRunOptions& o) {
  std::string& op = text.op;
  std::string& routing = text.routing;
  std::vector<int>& bs = text.bs;
  std::vector<int>& hidden = text.hidden;
  std::vector<int>& topk = text.topk;
  std::vector<int>& epp = text.experts_per_pe;
  std::vector<std::string>& dtypes = text.dtypes;
  app.add_option("op", op,
                 "dispatch | combine | dispatch-doubleplane | combine-doubleplane | "
                 "pipeline (dispatch, expert step, combine)")
      ->check(CLI::IsMember(
          {"dispatch", "combine", "dispatch-doubleplane", "combine-doubleplane", "pipeline"}));
  app.add_flag("--doubleplane", o.double_plane, "pipeline: use the two-data-plane operators");
  app.add_option("--pes,-n", o.pes, "number of PEs (-pes)")->check(CLI::Range(1, 64));
  app.add_option("--bs", bs, "tokens per PE; a list sweeps (-bs)")
      ->delimiter(',')
      ->check(CLI::Range(0, 1 << 20));
  // The operators' own rules check hidden, topk, experts per PE and the workers (case_error).
  app.add_option("--hidden", hidden, "hidden size (-h)")->delimiter(',');
  app.add_option("--topk", topk, "experts per token (-topk)")->delimiter(',');
  app.add_option("--experts-per-pe", epp, "experts per PE (-expertPerPe)")->delimiter(',');
  app.add_option("--dtype", dtypes, "int32 | float16 | bfloat16 | float32 (-type int32_t ...)")
      ->delimiter(',');
  app.add_option("--seed", o.seed, "input seed (default: fresh, printed)")->check(digits_only());
  app.add_option("--routing", routing,
                 "uniform | zipf | hot (every token's first slot to expert 0)")
      ->check(CLI::IsMember({"uniform", "zipf", "hot"}));
  app.add_option("--zipf-s", o.zipf_s, "zipf exponent")->check(finite_range(0.0, 10.0));
  app.add_option("--drop", o.drop, "probability of a -1 (no expert) entry")
      ->check(finite_range(0.0, 1.0));
  app.add_option("--empty-pes", o.empty_pes, "the last N PEs have no tokens")
      ->check(CLI::Range(0, 64));
  app.add_option("--iterations", o.iterations, "verified back-to-back calls")
      ->check(CLI::Range(1, 1000000));
  app.add_flag("--perf", o.perf, "time the operator and write a CSV");
  app.add_option("--warmup", o.warmup)->check(CLI::Range(0, 1000000));
  app.add_option("--loops", o.loops)->check(CLI::Range(1, 1000000));
  app.add_option("--output-dir", o.output_dir, "where --perf writes its CSVs");
  app.add_flag("--plot", o.plot,
               "with --perf (default: off): once the run ends, draw each shape's CSV into a PNG of "
               "the same name "
               "next to it: the last run's time per call on each PE (the whole op on its slowest "
               "worker, and the communication alone), the bandwidth of every run the CSV holds, "
               "and the last run's wait matrix; needs matplotlib in --plot-python (exit status 3 "
               "when no PNG could be drawn; the CSVs stay)");
  app.add_option("--plot-python", o.plot_python,
                 "the Python --plot runs (default: the one shmoe was built for, else python3)");
  app.add_option("--matrix-workers", o.matrix_workers);
  app.add_option("--vector-workers", o.vector_workers);
  app.add_option("--max-recv-rows", o.max_recv_rows, "window rows per PE (0: never overflows)")
      ->check(CLI::Range(std::size_t{0}, kMaxReceivedRows));
  app.add_flag("--copy-out", o.copy_out,
               "dispatch into, and combine from, buffers of the tool's own instead of the "
               "context's receive window (the experts then write to a second buffer)");
  app.add_option("--threshold", o.threshold,
                 "double plane: smallest segment for the copy engine, bytes");
  app.add_option("--timeout", o.timeout_s, "stop the whole run after this many seconds")
      ->check(finite_range(1.0, 1e6));
  app.add_option("--delay-pe", text.delay_pe,
                 "P:US: PE P sleeps US microseconds before each timed call (with --perf), so "
                 "that the slow-PE report has a PE to find");
  app.add_option("--shrink-ms", o.shrink_ms,
                 "shrink mode (elastic EP): a PE that does not arrive within MS milliseconds is "
                 "masked and the others go on without its experts (without --copy-out, the rows "
                 "stay in the receive window's fixed slots, one per (expert, source PE, token))")
      ->check(CLI::Range(0, 3'600'000));
  app.add_option("--fail-pe", text.fail_pe,
                 "P:HOW:IT: PE P fails at iteration IT (0-based; its calls are the "
                 "operators' call IT+1, as shrink mode's warnings and the PE lines count), HOW = "
                 "quit (stops calling), "
                 "stop (SIGSTOP in the middle of the iteration, SIGCONT once the others are "
                 "done) or kill (SIGKILL in the middle of the iteration; the job runs with "
                 "SHMOE_PE_LOSS=continue, and the others end with status 0); the others verify "
                 "their outputs against a reference without P's experts (needs --shrink-ms and "
                 "--iterations > IT). P,Q,...: several PEs fail alike (quit or kill; e.g. every "
                 "PE of one host)");
}

namespace {

// --delay-pe P:US into o.delay_pe and o.delay_us; an error text, or empty.
std::string parse_delay_pe(const std::string& text, MoeRunOptions& o) {
  const auto colon = text.find(':');
  const std::string bad = "--delay-pe=" + text + " is not P:US with P a PE (0.." +
                          std::to_string(o.pes - 1) + ") and US microseconds in 1..1000000";
  if (colon == std::string::npos) return bad;
  const std::string pe = text.substr(0, colon), us = text.substr(colon + 1);
  const auto digits = [](const std::string& s) {
    return !s.empty() && s.size() <= 7 &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!digits(pe) || !digits(us)) return bad;
  o.delay_pe = std::stoi(pe);
  o.delay_us = std::stod(us);
  if (o.delay_pe >= o.pes || o.delay_us < 1 || o.delay_us > 1e6) return bad;
  if (!o.perf) return "--delay-pe=" + text + " delays timed calls: give --perf too";
  return "";
}

// The PEs P,Q,... of --fail-pe into `pes` (ascending, distinct, each 0..n_pes-1); false if not.
bool parse_pe_list(const std::string& text, int n_pes, std::vector<int>& pes) {
  std::size_t at = 0;
  while (true) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string pe = text.substr(at, comma - at);
    if (pe.empty() || pe.size() > 7 ||
        !std::all_of(pe.begin(), pe.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return false;
    pes.push_back(std::stoi(pe));
    if (pes.back() >= n_pes) return false;
    if (comma == text.size()) break;
    at = comma + 1;
  }
  std::sort(pes.begin(), pes.end());
  return std::adjacent_find(pes.begin(), pes.end()) == pes.end();
}

// --fail-pe P[,Q...]:HOW:IT into o.fail_pes, o.fail_action and o.fail_iteration; an error text,
// or empty.
std::string parse_fail_pe(const std::string& text, MoeRunOptions& o) {
  const std::string bad = "--fail-pe=" + text + " is not P:HOW:IT with P a PE (0.." +
                          std::to_string(o.pes - 1) +
                          ", or distinct PEs P,Q,...), HOW quit, stop or kill, and IT an "
                          "iteration (0.." +
                          std::to_string(o.iterations - 1) + ", --iterations)";
  const auto first = text.find(':');
  const auto second = first == std::string::npos ? first : text.find(':', first + 1);
  if (second == std::string::npos) return bad;
  const std::string pe = text.substr(0, first), how = text.substr(first + 1, second - first - 1),
                    it = text.substr(second + 1);
  const auto digits = [](const std::string& s) {
    return !s.empty() && s.size() <= 7 &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  static const std::map<std::string, FailAction> actions = {
      {"quit", FailAction::kQuit}, {"stop", FailAction::kStop}, {"kill", FailAction::kKill}};
  const auto action = actions.find(how);
  if (!digits(it) || action == actions.end()) return bad;
  o.fail_pes.clear();
  if (!parse_pe_list(pe, o.pes, o.fail_pes)) return bad;
  o.fail_iteration = std::stoi(it);
  o.fail_action = action->second;
  if (o.fail_iteration >= o.iterations) return bad;
  if (static_cast<int>(o.fail_pes.size()) >= o.pes) {
    return "--fail-pe=" + text +
           " needs a PE that goes on: give fewer PEs than --pes=" + std::to_string(o.pes);
  }
  if (o.fail_pes.size() > 1 && o.fail_action == FailAction::kStop)
    return "--fail-pe=" + text + ": stop takes one PE (several: quit or kill)";
  if (o.shrink_ms == 0) return "--fail-pe=" + text + " needs shrink mode: give --shrink-ms too";
  if (o.perf) return "--fail-pe=" + text + " and --perf: a failing PE's job is not timed";
  if (o.op != MoeOp::kPipeline) return "--fail-pe=" + text + " runs the pipeline op only";
  return "";
}

}  // namespace

int finish_moe_options(const MoeOptionText& text, MoeRunOptions& o) {
  const std::string& op = text.op;
  const std::string& routing = text.routing;
  static const std::map<std::string, MoeOp> ops = {
      {"dispatch", MoeOp::kDispatch},
      {"combine", MoeOp::kCombine},
      {"dispatch-doubleplane", MoeOp::kDispatchDoublePlane},
      {"combine-doubleplane", MoeOp::kCombineDoublePlane},
      {"pipeline", MoeOp::kPipeline}};
  o.op = ops.at(op);
  o.routing = routing == "zipf"  ? Routing::kZipf
              : routing == "hot" ? Routing::kHot
                                 : Routing::kUniform;
  if (!text.delay_pe.empty()) {
    if (const std::string e = parse_delay_pe(text.delay_pe, o); !e.empty()) {
      std::fprintf(stderr, "shmoe-moe: %s\n", e.c_str());
      return 2;
    }
  }
  if (!text.fail_pe.empty()) {
    if (const std::string e = parse_fail_pe(text.fail_pe, o); !e.empty()) {
      std::fprintf(stderr, "shmoe-moe: %s\n", e.c_str());
      return 2;
    }
  }
  if (o.plot && !o.perf) {
    std::fprintf(stderr, "shmoe-moe: --plot draws the CSVs --perf writes: give --perf too\n");
    return 2;
  }
  if (o.empty_pes > o.pes) {
    std::fprintf(stderr, "shmoe-moe: --empty-pes=%d is out of range (0..%d)\n", o.empty_pes, o.pes);
    return 2;
  }
  // The lists sweep their product: refuse a sweep too large to be meant.
  const auto& [bs, hidden, topk, epp, dtypes] =
      std::tie(text.bs, text.hidden, text.topk, text.experts_per_pe, text.dtypes);
  const std::size_t sweep = bs.size() * hidden.size() * topk.size() * epp.size() * dtypes.size();
  constexpr std::size_t kMaxCases = 4096;
  if (sweep > kMaxCases) {
    std::fprintf(stderr, "shmoe-moe: the option lists make %zu shapes; at most %zu are allowed\n",
                 sweep, kMaxCases);
    return 2;
  }
  for (int b : bs)
    for (int h : hidden)
      for (int k : topk)
        for (int e : epp)
          for (const auto& d : dtypes) {
            auto dt = parse_dtype(d);
            if (!dt) {
              std::fprintf(
                  stderr, "shmoe-moe: --dtype=%s is not one of int32, float16, bfloat16, float32\n",
                  d.c_str());
              return 2;
            }
            const MoeCase c{b, h, k, e, *dt};
            if (const std::string error = case_error(o, c); !error.empty()) {
              std::fprintf(stderr, "shmoe-moe: %s\n", error.c_str());
              return 2;
            }
            o.cases.push_back(c);
          }
  return -1;
}

}  // namespace shmoe::tools
