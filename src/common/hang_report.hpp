// Hang reports: what every waiting thread of this PE waits for, as one line of text for people
// and one JSON object for tools (shmoerun's verdict). A PE writes one when one of its waits
// exceeds SHMOE_HANG_TIMEOUT, when another PE of the job hung, or on SIGUSR1.
//
// The JSON object:
//   {"pe": 0, "pid": 4242, "reason": "timeout" | "peer_hang" | "signal",
//    "waits": [{"thread": 4243, "op": "barrier", "detail": "barrier #3 round 0 (...)",
//               "peer": 1, "expected": 3, "seen": 2, "generation": 3, "waited_s": 2.0,
//               "timed_out": true}, ...]}
// "peer" is the PE whose write would end the wait (-1: unknown, or any of several); an empty
// "waits" means no thread of the PE is inside a shmoe wait (it is busy in the program).
#pragma once

#include <nlohmann/json_fwd.hpp>  // the whole library is costly to compile; few need it
#include <string>
#include <string_view>

#include "common/wait_state.hpp"

namespace shmoe {

// This process's report now. `timed_out`, if given, is the wait of the calling thread that
// exceeded the timeout (it is marked in "waits").
nlohmann::json build_hang_report(std::string_view reason, const WaitState* timed_out = nullptr);

// The report as one line: "hang report: PE 0 (pid N, timeout): thread T waits in barrier #3 for
// PE 1 (...; seen 2, expected 3) for 2.0 s".
std::string hang_report_line(const nlohmann::json& report);

// The line goes to stderr; the JSON goes to the file SHMOE_HANG_REPORT names ("%p" is replaced
// by the PE number), or to stderr when it is unset.
void write_hang_report(const nlohmann::json& report);

// Where SHMOE_HANG_REPORT sends PE `pe`'s report; empty when it is unset. Throws shmoe::Error
// for a pattern without %p when the job has several PEs (they would overwrite each other).
std::string hang_report_path(int pe, int n_pes);

// Throws shmoe::Error, naming SHMOE_HANG_REPORT, when PE `pe`'s report could not be written there
// (a bad pattern, a directory that does not exist or takes no files): checked at start-up, not
// found out during a hang.
void check_hang_report_destination(int pe, int n_pes);

// What a PE does when one of its waits times out, before it stops. The runtime installs a
// handler that also tells the other PEs; without one, the PE writes its own report only.
using HangHandler = void (*)(const WaitState& timed_out, double waited_s);
void set_hang_handler(HangHandler handler);
void handle_hang(const WaitState& timed_out, double waited_s);

}  // namespace shmoe
