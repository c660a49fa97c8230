// shmoerun's verdict on a hung job, from the PEs' hang reports (see src/common/hang_report.hpp):
// which PE the others wait on. A PE is to blame when others wait on it and it is not itself
// waiting in the same operation (it waits in another one, or in none: it is busy in the
// program, or never called the operation); a PE that waits in the same operation passes the
// blame on to the PE it waits for.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace shmoe::tools {

// reports[r] is PE r's report, or null when PE r sent none. Returns one line starting with
// "verdict: ".
std::string hang_verdict(const std::vector<nlohmann::json>& reports);

}  // namespace shmoe::tools
