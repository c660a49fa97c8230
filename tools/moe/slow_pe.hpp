// The slow-rank report: from the wait matrix (how long each PE waited for each source PE per
// call, SourceWaits), which PE, if any, holds the others up.
#pragma once

#include <string>
#include <vector>

namespace shmoe::tools {

struct SlowPeVerdict {
  int pe = -1;            // the slow PE, or -1: none stands out from the noise
  double blame_us = 0;    // what the others waited for the most-waited-for PE, per call
  double typical_us = 0;  // the median of that over all PEs: the noise it must stand out of
};

// wait_us[r * n_pes + s]: microseconds PE r waited for PE s per call. A PE's blame is the mean
// of what the other PEs waited for it. The PE with the most blame is named when its blame
// exceeds the median blame by at least kMinExcessUs and by kMinRatio times the next PE's excess:
// a PE that makes everyone wait in every call stands out, while the waits that time-sharing
// spreads over all PEs (when PEs outnumber cores) do not name anyone.
SlowPeVerdict judge_slow_pe(const std::vector<double>& wait_us, int n_pes);

// The matrix and the verdict as text, for the run's report.
std::string wait_matrix_text(const std::vector<double>& wait_us, int n_pes,
                             const SlowPeVerdict& verdict);

}  // namespace shmoe::tools
