// What `shmoe-moe mega` reports: timings gathered over all PEs into one summary line (and a CSV
// row), and the Chrome trace of one fused call.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/huge_pages.hpp"
#include "mega_options.hpp"

namespace shmoe::tools {

const char* mode_name(shmoe_fp8_format_t f);

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
// operator launches alone), and each kept call's end-to-end time.
struct Timings {
  Stats e2e, kernel;
  std::vector<double> e2e_us;
  template <typename Call>
  void time(bool keep, const MegaMoE& op, Call&& call) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (keep) {
      e2e.add(us);
      e2e_us.push_back(us);
      kernel.add(op.last_kernel_us());
    }
  }
  // Collective: every PE gets the summary over all PEs.
  PerfSummary summary(bool timed) const;
};

// What a timed call reads of the weights on the PE that reads the most (the experts that got
// rows), against the machine's limit for it: a streaming read of as many bytes by one thread on
// every PE at once. Decode is bound by these reads.
struct WeightReads {
  bool measured = false;
  std::string form;  // the weights' form: fp8 or bf16
  double bytes = 0;
  double weight_gbps = 0;  // bytes over the median call (each call's time its slowest PE's)
  double read_gbps = 0;    // bytes over the median read (each its slowest PE's)
};

// The reads, one after each timed call, so that call and read see the same machine: on a shared
// host the read's speed varied 2x from one second to the next (13-21 GB/s per PE within one
// run of `shmoe-moe mega`), and a read timed after all the calls made the ratio anything from 0.7
// to 1.4. The read also leaves none of the weights in cache for the next call, as the other
// layers of a model would not.
class WeightReadRounds {
 public:
  WeightReadRounds(std::string form, std::size_t my_bytes);  // collective
  void round(bool keep);                                     // collective
  // The medians over the kept rounds, of the reads and of the calls in `call_us` (one per kept
  // round, as Timings::e2e_us holds them). Collective.
  WeightReads result(const std::vector<double>& call_us) const;

 private:
  std::string form_;
  std::size_t bytes_;
  std::vector<std::byte, HugePageAllocator<std::byte>> buffer_;
  std::vector<double> read_s_;
  std::uint64_t sink_ = 0;
};

// Prints the summary line on PE 0 (and appends the CSV row with --csv).
void report(const MegaOptions& o, const char* variant, const std::string& shape,
            const std::string& verdict, const PerfSummary& p, const WeightReads& reads);

// Each PE writes its events to PATH.peN; PE 0 merges them into one Chrome trace (one process per
// PE, one thread per worker), time zero at the first event. Collective.
void write_trace(const std::string& path, const std::vector<MegaStageEvent>& events,
                 const MegaMoEInfo& layer);

}  // namespace shmoe::tools
