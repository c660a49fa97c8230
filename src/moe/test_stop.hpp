// SHMOE_TEST_STOP_IN=PE:STEP, for tests of shrink mode: a stop (SIGSTOP) at a point inside a step
// that no signal from outside could hit reliably, where a stop leaves the others half-informed.
#pragma once

#include <string_view>

namespace shmoe::moe {

// The steps that have a stop point: sync_live, rejoin, combine_reads.
// Stops this process (SIGSTOP) when SHMOE_TEST_STOP_IN names PE `me` and `step`, the first time
// only; returns at once otherwise. Throws shmoe::Error where the setting is not PE:STEP.
void test_stop_point(int me, std::string_view step);
// Whether test_stop_point(me, step) would stop (cheap where SHMOE_TEST_STOP_IN is not set).
bool test_stop_armed(int me, std::string_view step);
// Reads the setting now: throws shmoe::Error where it is not PE:STEP (an operator's constructor
// calls it, so that a bad value is refused there rather than inside a call's workers).
void check_test_stop_setting();

}  // namespace shmoe::moe
