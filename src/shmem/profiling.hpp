// The profiling interface (OpenSHMEM 1.5 section 10). Every API function is defined under its
// name-shifted name pshmem_X, and shmem_X is a weak alias of it: a tool that defines its own
// shmem_X takes precedence at link time (shared or static) and reaches the library through
// pshmem_X. Calls from one API function to another use the pshmem_ names, so a tool sees only
// the program's own calls.
#pragma once

#include "pshmem.h"

// Makes shmem_X a weak alias of pshmem_X, which the same file defines.
#define SHMOE_WEAK_ALIAS(name) \
  extern "C" decltype(p##name) name __attribute__((weak, alias("p" #name)));
