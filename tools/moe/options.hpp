// shmoe-moe's command line: one or several shapes (list forms sweep their product), routing,
// verification and perf settings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dtype.hpp"
#include "shmoe/moe.hpp"

// CLI11 is a large header: only the files that build the command line include it.
namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace shmoe::tools {

enum class MoeOp { kDispatch, kCombine, kDispatchDoublePlane, kCombineDoublePlane, kPipeline };
enum class Routing { kUniform, kZipf, kHot };
// How --fail-pe's PE fails: it stops calling (as DeepEP's shrink test fails its ranks), is
// stopped by SIGSTOP in the middle of an iteration's traffic (and resumed after the others end),
// or is killed by SIGKILL there (the job then runs with SHMOE_PE_LOSS=continue).
enum class FailAction { kQuit, kStop, kKill };

struct MoeCase {
  int bs = 8, hidden = 16, topk = 2, experts_per_pe = 2;
  DType dtype = SHMOE_DTYPE_INT32;
};

// The most rows --max-recv-rows (and mega's --max-received-tokens) may ask for: 64 PEs x 2^20
// tokens x 4096 experts per token, more than any call can send.
inline constexpr std::size_t kMaxReceivedRows = std::size_t{1} << 38;

// The directory of this program (/proc/self/exe), or empty when it cannot be read.
std::string program_dir();
// The Python --plot runs by default: the one shmoe was built for (SHMOE_PLOT_PYTHON, from
// CMake's Python3_EXECUTABLE) if it is still there (a wheel's build environment is gone once
// installed), else the python3 beside this program (a virtual environment's bin/), else python3
// on PATH.
std::string default_plot_python();

struct MoeRunOptions {
  MoeOp op = MoeOp::kPipeline;
  bool double_plane = false;  // for kPipeline
  int pes = 2;
  std::vector<MoeCase> cases;
  std::uint64_t seed = 0;  // 0: a fresh random seed, printed
  Routing routing = Routing::kUniform;
  double zipf_s = 1.2;
  double drop = 0;     // probability of a -1 ("no expert") entry
  int empty_pes = 0;   // the last N PEs have no tokens
  int iterations = 1;  // verified back-to-back calls, each with fresh inputs
  bool perf = false;
  int warmup = 5, loops = 50;
  std::string output_dir = "output/perf";
  // --plot: once the job has ended, the launching process has plot_python draw each case's perf
  // CSV into a PNG next to it (plot.hpp).
  bool plot = false;
  std::string plot_python = default_plot_python();
  int matrix_workers = 0, vector_workers = 0;
  std::size_t max_recv_rows = 0;
  std::size_t threshold = 2u << 20;
  // false: dispatch's rows are read in the receive window, the experts overwrite them in place,
  // and combine takes them from there (one copy per byte); true: caller-owned buffers.
  bool copy_out = false;
  double timeout_s = 600;
  // --delay-pe P:US: PE delay_pe sleeps delay_us before each timed call (a slow PE on purpose,
  // for the slow-rank report); -1: none.
  int delay_pe = -1;
  double delay_us = 0;
  // --shrink-ms: shrink mode's bound (0: off); the tool then uses buffers of its own (copy_out).
  int shrink_ms = 0;
  // --fail-pe P[,Q...]:HOW:IT: PEs fail_pes (ascending; one for stop) fail at iteration
  // fail_iteration; empty: none.
  std::vector<int> fail_pes;
  FailAction fail_action = FailAction::kQuit;
  int fail_iteration = 0;
  bool fails(int pe) const {
    for (int p : fail_pes) {
      if (p == pe) return true;
    }
    return false;
  }
};

std::string op_name(MoeOp op);
bool op_is_combine(MoeOp op);
bool op_uses_double_plane(const MoeRunOptions& o);

// What the command line gives as text or lists, before finish_moe_options turns it into cases.
struct MoeOptionText {
  std::string op = "pipeline", routing = "uniform";
  std::string delay_pe;  // --delay-pe, as P:US
  std::string fail_pe;   // --fail-pe, as P[,Q...]:HOW:IT
  std::vector<int> bs{8}, hidden{16}, topk{2}, experts_per_pe{2};
  std::vector<std::string> dtypes{"int32"};
};

// argv[1..] reversed, as CLI11 takes it, with the single-dash spellings of MoE benchmark
// scripts (-pes -bs -h -topk -expertPerPe -type -warmup -loops -perf) made ours.
std::vector<std::string> reversed_args(int argc, char** argv);
// The dispatch/combine options, on shmoe-moe's main command (command_line.hpp).
void add_moe_options(CLI::App& app, MoeOptionText& text, MoeRunOptions& o);
// After parsing: the cases the lists sweep, and the refusals CLI11 cannot express. Returns an
// exit code to stop with (an error, said on stderr), or -1 to go on.
int finish_moe_options(const MoeOptionText& text, MoeRunOptions& o);

// The operators' configuration for one case (the public API's).
MoeConfig moe_config(const MoeRunOptions& options, const MoeCase& c);

}  // namespace shmoe::tools
