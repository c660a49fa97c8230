// Perf CSVs that gather runs: rows are appended, each with the id and UTC time of the run that
// wrote it, and the header goes in once. (Rewriting the file lost a concurrent run's figures.)
#pragma once

#include <fstream>
#include <string>

#include "options.hpp"

namespace shmoe::tools {

// This run's id (PID of the writer and its start, in seconds since the epoch: "12345-1767139200")
// and its start as UTC ("2026-12-06T01:34:03Z"), the same for every CSV it writes.
struct RunStamp {
  std::string id;
  std::string time;
};
const RunStamp& run_stamp();

// The name of a case's perf CSV: the op as run ("pipeline-doubleplane" for --doubleplane).
std::string perf_name(const MoeRunOptions& options);
// Where --perf writes the CSV named `name` of case c, run on `pes` PEs, in --output-dir (the wait
// matrix's is perf_name + "_waits"): the PEs write it, --plot reads it (plot.hpp).
std::string perf_csv_path(const MoeRunOptions& options, const MoeCase& c, const std::string& name,
                          int pes);

// `path` opened for appending, its header (which starts with "run_id,time,") written if the file
// is new or empty. Throws std::runtime_error naming the file when it holds another header (other
// columns): the rows would not line up; or when it cannot be opened.
std::ofstream open_run_csv(const std::string& path, const std::string& header);

}  // namespace shmoe::tools
