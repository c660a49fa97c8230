// shmoerun's verdict on a hung job, from the PEs' hang reports (see src/common/hang_report.hpp):
// which PE the others wait on. A PE is to blame when others wait on it and it is not itself
// waiting in the same operation (it waits in another one, or in none: it is busy in the
// program, or never called the operation); a PE that waits in the same operation passes the
// blame on to the PE it waits for. Waits that name no single PE (a reduction's, a flag that
// nobody sets) blame the one PE that is not waiting while all the others wait, if there is
// exactly one. A PE that has called shmem_finalize is not waiting either: it left the job.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace shmoe::tools {

struct HangVerdict {
  std::string line;           // starts with "verdict: "
  std::vector<int> culprits;  // the PEs the line blames, ascending; empty when it blames none
};

// reports[r] is PE r's report, or null when PE r sent none. finalized[r] is true when PE r has
// said goodbye to the config store (it called shmem_finalize); shorter than reports (or empty)
// when unknown.
HangVerdict hang_verdict(const std::vector<nlohmann::json>& reports,
                         const std::vector<bool>& finalized = {});

}  // namespace shmoe::tools
