// A symmetric heap's pages come from /dev/shm when they are first touched (see
// shm_admission.hpp). When /dev/shm has no page left to give, the kernel sends SIGBUS to the PE
// that touched it; this turns that into a message that says so, naming the segment, the address
// and /dev/shm's space, before the PE dies of the signal as before. A SIGBUS elsewhere goes to
// the handler that was there before (UCX's, the program's, or the default).
#pragma once

namespace shmoe::heap {

// Installs the SIGBUS handler once per process; later calls do nothing.
void explain_bus_errors_in_segments();

}  // namespace shmoe::heap
