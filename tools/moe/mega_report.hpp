// What `shmoe-moe mega` reports: timings gathered over all PEs into one summary line (and a CSV
// row), and the Chrome trace of one fused call.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "kernel/stage_trace.hpp"
#include "mega_options.hpp"
#include "moe/mega_moe.hpp"

namespace shmoe::tools {

const char* mode_name(numeric::Fp8Format f);

struct Stats {
  double sum = 0, min = 1e300, max = 0;
  int n = 0;
  void add(double v);
  double avg() const { return n ? sum / n : 0; }
};

// True on every PE when every PE passed. Collective.
bool all_passed(bool mine);

// Milliseconds over all PEs: the slowest PE's average, and the extremes.
struct PerfSummary {
  bool timed = false;
  double e2e_avg = 0, e2e_min = 0, e2e_max = 0, kernel_avg = 0, kernel_min = 0, kernel_max = 0;
};

// One variant's timings on this PE: end to end (host clock around the call) and kernel (the
// operator launches alone).
struct Timings {
  Stats e2e, kernel;
  template <typename Call>
  void time(bool keep, const moe::MegaMoE& op, Call&& call) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (keep) {
      e2e.add(us);
      kernel.add(op.last_kernel_us());
    }
  }
  // Collective: every PE gets the summary over all PEs.
  PerfSummary summary(bool timed) const;
};

// What a timed call reads of the weights on the PE that reads the most (the experts that got
// rows), and the machine's limit for it: a streaming read of as many bytes by one thread on every
// PE at once, the median of 5 (each the slowest PE's time). Decode is bound by these reads.
struct WeightReads {
  bool measured = false;
  std::string form;  // the weights' form: fp8 or bf16
  double bytes = 0, read_gbps = 0;
};
WeightReads measure_weight_reads(const std::string& form, std::size_t my_bytes);  // collective

// Prints the summary line on PE 0 (and appends the CSV row with --csv).
void report(const MegaOptions& o, const char* variant, const std::string& shape,
            const std::string& verdict, const PerfSummary& p, const WeightReads& reads);

// Each PE writes its events to PATH.peN; PE 0 merges them into one Chrome trace (one process per
// PE, one thread per worker), time zero at the first event. Collective.
void write_trace(const std::string& path, const std::vector<kernel::StageEvent>& events,
                 const moe::MegaMoEConfig& cfg);

}  // namespace shmoe::tools
