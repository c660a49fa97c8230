// shmoe-moe --plot: the perf CSVs drawn into PNGs by plot_csv.py (matplotlib), run by the process
// that started the PEs once the job has ended, so that no PE waits in a collective call while
// Python starts.
#pragma once

#include "options.hpp"

namespace shmoe::tools {

// Draws each case's CSV (and its wait matrix) into a PNG of the same name, if the job ended with
// `job_status` 0; says on stderr why not otherwise. Returns the job's status, or 3 when the
// job passed but no PNG could be drawn (no matplotlib, no plot_csv.py, no interpreter).
int plot_perf_csvs(const MoeRunOptions& options, int job_status);

}  // namespace shmoe::tools
